"""One writer, many readers, threads, fork and exit.

Multi-process cases run real processes (``subprocess`` with the same
interpreter and the kernel under test), never mocks.
"""

import errno
import os
import pickle
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import zlib

import pytest

import semidbm
from semidbm import _compaction, _index_file, _kernel, _lock, _pure, _settings, db
from semidbm.format import INDEX_NAME

from .conftest import kernel_name
from .support.child import PRELUDE, environment, run
from .support.log import records_after_start
from .support.threads import check_models_stored, run_beside_a_maintainer

posix_only = pytest.mark.skipif(os.name != "posix", reason="fork and signals are POSIX")
#: Windows refuses to replace a file another process has open (docs/limits.md, "Windows").
swap_under_readers = pytest.mark.skipif(
    os.name == "nt", reason="Windows cannot compact while a reader has the file open"
)


class Child:
    """A writer in another process, driven line by line over its standard input."""

    SCRIPT = """
    db = semidbm.open(path, "c")
    print("ready %d" % os.getpid(), flush=True)
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        if command == "set":
            key, value = argument.split("=")
            db[key] = value
        elif command == "delete":
            del db[argument]
        elif command == "sync":
            db.sync()
        elif command == "compact":
            db.compact()
        elif command == "close":
            db.close()
        print("done", flush=True)
    """

    def __init__(self, kernel, path):
        code = PRELUDE + textwrap.dedent(self.SCRIPT)
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, kernel_name(kernel), str(path)],
            env=environment(kernel),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        assert line.startswith("ready"), line
        self.pid = int(line.split()[1])

    def send(self, *commands):
        for command in commands:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
            assert self.process.stdout.readline() == "done\n", command

    def finish(self):
        self.process.stdin.close()
        returncode = self.process.wait(timeout=60)
        self.process.stdout.close()
        assert returncode == 0

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=60)
        self.process.stdin.close()
        self.process.stdout.close()


def test_second_writer_in_the_same_process_is_refused(dbopen, dbpath):
    first = dbopen(dbpath, "c")
    first[b"a"] = b"1"
    first.sync()
    for flag in "wcn":
        refusal = "locked by another writer \\(this process: a database object still open"
        with pytest.raises(semidbm.error, match=refusal):
            dbopen(dbpath, flag)
    assert first[b"a"] == b"1", "a refused 'n' must not empty the database"
    first.close()
    with dbopen(dbpath, "w") as second:
        assert second[b"a"] == b"1"


def test_a_writer_here_is_named_by_any_path_and_a_shared_writer_is_told_too(dbopen, dbpath):
    # Caught by comparing the directory itself, not its spelling: a check on the path
    # string would miss the symlink and let the lock name this process's id.
    link = dbpath.parent / "link.db"
    with dbopen(dbpath, "c"):
        link.symlink_to(dbpath)
        for flag in ("w", "wm"):
            with pytest.raises(semidbm.error, match="another writer \\(this process: ") as refused:
                dbopen(link, flag)
            assert refused.value.errno == errno.EAGAIN
    dbopen(link, "w").close()  # closed: nothing of it is left to refuse


def test_the_class_of_a_database_has_a_name_a_user_can_read(dbopen, dbpath, kernel):
    """``type(db)`` names a class of ``semidbm.db`` that is that class, and pickles by it.

    Catches a name set on the class alone (every db class was called
    ``semidbm.db.SemiDBM``, which did not exist: ``pickle.dumps(type(db))``
    failed), in this process and in a new one, where nothing made the
    class yet.
    """
    pure = "" if semidbm.implementation == _kernel.name_of(kernel) else "Pure"
    for flag, name in (("c", "SemiDBM"), ("wm", "SharedSemiDBM"), ("ws", "SyncedSemiDBM"),
                       ("wsu", "SyncedSharedSemiDBM")):
        with dbopen(dbpath, flag) as opened:
            db_class = type(opened)
        assert (db_class.__module__, db_class.__qualname__) == (
            "semidbm.db", name.replace("SemiDBM", pure + "SemiDBM")
        )
        assert getattr(db, db_class.__qualname__) is db_class
        assert isinstance(opened, semidbm.Database)
        pickled = pickle.dumps(db_class)
        assert pickle.loads(pickled) is db_class
        code = "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read()))"
        unpickled = subprocess.run(
            [sys.executable, "-c", code], input=pickled, capture_output=True, check=True
        )
        assert unpickled.stdout.decode() == "<class 'semidbm.db.%s'>\n" % db_class.__qualname__
    assert not hasattr(db, "NoSuchSemiDBM")


def test_the_class_of_a_kernel_that_cannot_be_imported_is_no_attribute(monkeypatch):
    """``hasattr`` and ``getattr`` with a default answer for a class of a kernel not built.

    Catches ``semidbm.db.__getattr__`` letting the kernel's ImportError
    through, which ``hasattr`` does not catch.
    """

    def unbuilt(name):
        raise ModuleNotFoundError("No module named 'semidbm._%s'" % name)

    monkeypatch.setattr(_kernel, "load", unbuilt)
    for name in ("CompiledSemiDBM", "PureSemiDBM", "SyncedSharedSemiDBM"):
        assert not hasattr(db, name)
        assert getattr(db, name, None) is None


def test_closing_releases_the_lock_and_readers_take_none(dbopen, dbpath):
    writer = dbopen(dbpath, "c")
    with dbopen(dbpath, "r") as reader:
        assert len(reader) == 0
    writer.close()
    dbopen(dbpath, "w").close()
    assert _lock.writer_active(str(dbpath)) is False


def test_compaction_keeps_the_lock_file_and_the_lock(dbopen, dbpath):
    writer = dbopen(dbpath, "c")
    writer[b"a"] = b"1"
    writer[b"a"] = b"2"
    lock_inode = os.stat(dbpath / "lock").st_ino
    writer.compact()
    assert os.stat(dbpath / "lock").st_ino == lock_inode
    with pytest.raises(semidbm.error, match="locked"):
        dbopen(dbpath, "w")
    writer.close()


def test_writer_in_another_process_is_refused_before_and_after_it_compacts(kernel, dbopen, dbpath):
    child = Child(kernel, dbpath)
    try:
        child.send("set a=1", "set a=2", "sync")
        refusal = "locked by another writer \\(process %d\\)" % child.pid
        with pytest.raises(semidbm.error, match=refusal):
            dbopen(dbpath, "w")
        child.send("compact")
        with pytest.raises(semidbm.error, match="locked"):
            dbopen(dbpath, "c")
        with dbopen(dbpath, "r") as reader:
            assert dict(reader.items()) == {b"a": b"2"}
        child.send("close")
    finally:
        child.finish()
    with dbopen(dbpath, "w") as database:
        assert dict(database.items()) == {b"a": b"2"}


@posix_only
def test_a_killed_writer_releases_the_lock_and_keeps_what_it_synced(kernel, dbopen, dbpath):
    child = Child(kernel, dbpath)
    child.send("set synced=1", "sync", "set buffered=2")
    with pytest.raises(semidbm.error, match="locked"):
        dbopen(dbpath, "w")
    child.kill()
    with dbopen(dbpath, "w") as database:
        assert dict(database.items()) == {b"synced": b"1"}
        database[b"after"] = b"3"
    with dbopen(dbpath) as database:
        assert dict(database.items()) == {b"synced": b"1", b"after": b"3"}


@swap_under_readers
def test_reader_sees_what_was_flushed_and_refresh_brings_the_rest(kernel, dbopen, dbpath):
    child = Child(kernel, dbpath)
    try:
        child.send("set a=1", "set b=2", "sync", "set c=3")
        reader = dbopen(dbpath, "r")
        assert dict(reader.items()) == {b"a": b"1", b"b": b"2"}
        child.send("delete a", "set b=22", "sync")
        assert dict(reader.items()) == {b"a": b"1", b"b": b"2"}, "a reader sees its snapshot"
        reader.refresh()
        assert dict(reader.items()) == {b"b": b"22", b"c": b"3"}
        child.send("set d=4", "compact")
        reader.refresh()
        assert dict(reader.items()) == {b"b": b"22", b"c": b"3", b"d": b"4"}
        child.send("set e=5", "sync")
        reader.refresh()
        assert reader[b"e"] == b"5" and len(reader) == 4
        child.send("close")
        reader.close()
    finally:
        child.finish()


def test_refresh_over_a_key_written_twice_since(kernel, dbpath):
    """The compiled kernel crashed here: the second record's key was looked up in the buffer."""
    run(
        kernel,
        """
        writer = semidbm.open(path, "c", buffer_size=0)
        writer[b"a"] = b"0"
        reader = semidbm.open(path, "r")
        writer[b"a"] = b"1"
        writer[b"b"] = b"1"
        writer[b"a"] = b"2"
        del writer[b"b"]
        reader.refresh()
        assert dict(reader.items()) == {b"a": b"2"}, reader.items()
        """,
        dbpath,
    )


def test_refresh_over_megabytes_written_since(kernel, dbpath):
    """A refresh that reads a long stretch of log (the compiled kernel parses it in a thread)."""
    run(
        kernel,
        """
        writer = semidbm.open(path, "c")
        for i in range(1000):
            writer[b"%d" % i] = b"old"
        writer.sync()
        reader = semidbm.open(path, "r")
        for i in range(60_000):
            writer[b"%d" % (i % 7_000)] = b"%d" % i * 30
        for i in range(0, 7_000, 3):
            del writer[b"%d" % i]
        writer.sync()
        assert len(reader) == 1000
        reader.refresh()
        assert dict(reader.items()) == dict(writer.items())
        assert len(reader) == 7_000 - len(range(0, 7_000, 3))
        """,
        dbpath,
    )


def test_refresh_over_a_corrupt_record_raises_and_closes_the_reader(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
    reader = dbopen(dbpath, "r")
    with open(dbpath / "data", "ab") as handle:
        handle.write(struct.pack("!ii", 1, 1) + b"a2" + struct.pack("!I", zlib.crc32(b"a2")))
        handle.write(struct.pack("!ii", 1, -7) + b"x" * 20)
    with pytest.raises(semidbm.DBMLoadError, match="corrupt record"):
        reader.refresh()
    assert reader.closed
    with pytest.raises(semidbm.error, match="closed"):
        reader[b"a"]
def test_compaction_while_a_reader_is_open(dbopen, dbpath):
    writer = dbopen(dbpath, "c")
    writer[b"a"] = b"1"
    writer[b"a"] = b"2"
    writer.sync()
    reader = dbopen(dbpath, "r")
    if os.name == "nt":
        # Refused, and nothing changes; it works once the reader is gone.
        with pytest.raises(semidbm.error, match="cannot compact"):
            writer.compact()
        assert sorted(os.listdir(dbpath)) == ["data", "lock"]
        assert dict(reader.items()) == dict(writer.items()) == {b"a": b"2"}
        reader.close()
        writer.compact()
    else:
        # The reader keeps the old file until it refreshes.
        writer.compact()
        assert dict(reader.items()) == {b"a": b"2"}
        writer[b"b"] = b"3"
        writer.sync()
        reader.refresh()
        assert dict(reader.items()) == {b"a": b"2", b"b": b"3"}
        reader.close()
    writer.close()
    with dbopen(dbpath) as database:
        assert database[b"a"] == b"2"


def test_a_refresh_that_switches_index_files_is_atomic_for_other_threads(kernel, dbopen, dbpath):
    # One thread refreshes a reader while the writer installs new index
    # files (a sync past 4 MiB of uncovered log writes one); another thread
    # reads keys that never change through the same reader: none is ever
    # missing, and the count never drops.
    stable = {b"stable-%d" % number: b"%d" % number for number in range(100)}
    with dbopen(dbpath, "c") as writer:
        writer.update(stable)
        writer.sync()
        reader = dbopen(dbpath, "r")
        done, errors = threading.Event(), []

        def refresher():
            while not done.is_set():
                reader.refresh()

        def looker():
            while not done.is_set():
                count = len(reader)
                if count < len(stable):
                    errors.append("len() gave %d" % count)
                for key, value in stable.items():
                    if reader.get(key) != value:
                        errors.append("%r read as %r" % (key, reader.get(key)))
                        break

        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)
        threads = [threading.Thread(target=refresher), threading.Thread(target=looker)]
        try:
            for thread in threads:
                thread.start()
            filler = b"f" * 1000
            for round_number in range(6):
                writer.update((b"r%d-%d" % (round_number, n), filler) for n in range(5000))
                writer.sync()
        finally:
            done.set()
            for thread in threads:
                thread.join()
            sys.setswitchinterval(switch)
            reader.close()
    assert errors == [], errors[:5]
    if kernel_name(kernel) == "cython":  # the compiled kernel's writer wrote index files
        assert (dbpath / INDEX_NAME).exists()


def test_refresh_on_a_writer_does_nothing(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
        database.refresh()
        assert dict(database.items()) == {b"a": b"1"}


def test_reader_leaves_a_write_in_progress_alone(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        database[b"a"] = b"1"
    holder = _lock.WriterLock(str(dbpath), 0o666)
    try:
        partial = struct.pack("!ii", 1, 0x200000) + b"k" + b"x" * 0x200000
        with open(dbpath / "data", "ab") as handle:
            handle.write(partial)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            reader = dbopen(dbpath, "r")
        assert dict(reader.items()) == {b"a": b"1"}
        with open(dbpath / "data", "ab") as handle:
            handle.write(struct.pack("!I", zlib.crc32(b"k" + b"x" * 0x200000)))
        reader.refresh()
        assert dict(reader.items()) == {b"a": b"1", b"k": b"x" * 0x200000}
        reader.close()
        with dbopen(dbpath, verify_checksums=True) as again:
            assert again[b"k"] == b"x" * 0x200000
    finally:
        holder.release()


def test_threads_sharing_one_database(dbopen, dbpath):
    database = dbopen(dbpath, "c", buffer_size=4096)
    models = [{} for _ in range(4)]

    def writer(number):
        model = models[number]
        for i in range(3000):
            key = b"t%d-%d" % (number, i % 500)
            if i % 7 == 3 and key in model:
                del database[key]
                del model[key]
            else:
                database[key] = b"%d" % i
                model[key] = b"%d" % i
            assert database[key] == model[key] if key in model else key not in database

    def maintain():
        database.sync()
        database.compact()
        try:
            len(database.keys())
        except RuntimeError:
            pass  # keys changed while they were listed, as with a dict

    assert run_beside_a_maintainer(writer, maintain) == []
    check_models_stored(dbopen, dbpath, database, models)


@pytest.mark.parametrize("buffer_size", [0, 1 << 16], ids=["unbuffered", "buffered"])
def test_a_write_that_returns_while_another_thread_closes_is_kept(dbopen, dbpath, buffer_size):
    # close() writes out and fsyncs with the GIL released: a write made by
    # another thread meanwhile either lands (and is there once closed) or
    # raises "closed"; none returns and is lost with the buffer.
    def writer(database, prefix, written, errors, going):
        number = 0
        while True:
            key = b"%s-%d" % (prefix, number)
            try:
                database[key] = key * 8
            except semidbm.error as exc:
                if "closed" not in str(exc):
                    errors.append(exc)
                return
            written.append(key)
            number += 1
            if number == 200:
                going.set()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for attempt in range(5):
            database = dbopen(dbpath, "n", buffer_size=buffer_size)
            written, errors, going = [], [], threading.Event()
            thread = threading.Thread(
                target=writer, args=(database, b"%d" % attempt, written, errors, going)
            )
            thread.start()
            going.wait()
            database.close()
            thread.join()
            assert errors == []
            with dbopen(dbpath, verify_checksums=True) as again:
                missing = [key for key in written if key not in again]
                assert missing == [], (attempt, len(missing), len(written))
    finally:
        sys.setswitchinterval(switch)


def test_iteration_in_another_thread_waits_for_a_compaction(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    keys = {b"%d" % i for i in range(20)}
    for key in keys:
        database[key] = b"v"
    begun = iter(database)
    next(begun)
    outcomes = {}

    def go_on():
        # Begun before the compaction: it waits, then stops as after any change.
        with pytest.raises(RuntimeError, match="changed"):
            next(begun)
        outcomes["begun before"] = "stopped"

    def start_now():
        outcomes["begun during"] = set(database)  # waits for the compaction, then reads all

    threads = [threading.Thread(target=go_on), threading.Thread(target=start_now)]

    def progress(done, total):
        if not threads[0].is_alive() and not outcomes:
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(0.2)
            assert not outcomes, "the other threads must wait for the compaction"

    database.compact(progress=progress)
    for thread in threads:
        thread.join()
    assert outcomes == {"begun before": "stopped", "begun during": keys}
    database.close()


def test_threads_reading_while_one_closes(dbopen, dbpath):
    database = dbopen(dbpath, "c")
    for i in range(1000):
        database[b"%d" % i] = b"v"
    outcomes = []

    def reader():
        try:
            while True:
                for i in range(1000):
                    database[b"%d" % i]
        except semidbm.error as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for thread in threads:
        thread.start()
    database.close()
    for thread in threads:
        thread.join()
    assert len(outcomes) == 3 and all("closed" in outcome for outcome in outcomes)


FORK_SCRIPT = """
db = semidbm.open(path, "c")
for i in range(50):
    db[b"before-%d" % i] = b"x" * i
child = os.fork()
if child == 0:
    assert db[b"before-7"] == b"x" * 7, "the child reads what it inherited"
    try:
        db[b"child"] = b"never"
    except semidbm.error as exc:
        assert "forked child" in str(exc), exc
    else:
        raise AssertionError("a forked child wrote")
    if sys.argv[3] == "close":
        db.close()
    sys.exit(0)  # a normal exit: atexit handlers and garbage collection run
_, status = os.waitpid(child, 0)
assert status == 0, status
for i in range(50):
    db[b"after-%d" % i] = b"y" * i
db.close()
"""

NO_FORK_SCRIPT = """
db = semidbm.open(path, "c")
for i in range(50):
    db[b"before-%d" % i] = b"x" * i
for i in range(50):
    db[b"after-%d" % i] = b"y" * i
db.close()
"""


@posix_only
@pytest.mark.parametrize("child_closes", ["close", "exit"])
def test_a_forked_child_never_writes_the_parents_database(kernel, tmp_path, child_closes):
    forked = tmp_path / "forked.db"
    plain = tmp_path / "plain.db"
    code = PRELUDE + FORK_SCRIPT
    result = subprocess.run(
        [sys.executable, "-c", code, kernel_name(kernel), str(forked), child_closes],
        env=environment(kernel),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    run(kernel, NO_FORK_SCRIPT, plain)
    assert records_after_start((forked / "data").read_bytes()) == records_after_start(
        (plain / "data").read_bytes()
    ), "the same records after each log's own id"


def test_open_database_is_flushed_at_interpreter_exit(kernel, dbopen, dbpath):
    run(kernel, """
    db = semidbm.open(path, "c")
    for i in range(100):
        db[b"%d" % i] = b"value"
    """, dbpath)
    with dbopen(dbpath, "w") as database:
        assert len(database) == 100 and database[b"99"] == b"value"


def test_collected_database_is_flushed_and_unlocked(kernel, dbopen, dbpath):
    run(kernel, """
    db = semidbm.open(path, "c")
    for i in range(100):
        db[b"%d" % i] = b"value"
    del db
    gc.collect()
    again = semidbm.open(path, "w")  # the lock was released
    assert len(again) == 100
    again.close()
    os._exit(0)  # skip the exit handlers: only garbage collection flushed
    """, dbpath)
    with dbopen(dbpath) as database:
        assert len(database) == 100



def letting_other_threads_run(function):
    """``function``, made to let the other threads run first, as the GIL may at any Python call."""

    def call(*args, **kwargs):
        time.sleep(0.0005)
        return function(*args, **kwargs)

    return call


@pytest.mark.parametrize("operation", ["sync", "compact"])
@pytest.mark.parametrize("buffer_size", [0, 4096], ids=["unbuffered", "buffered"])
def test_writes_made_while_another_thread_syncs_or_compacts_land(
    dbopen, dbpath, monkeypatch, operation, buffer_size
):
    # sync() and compact() call Python code (the index file's writing,
    # the file swap), where the GIL may pass to another thread: here each
    # such call lets the others run. Writes made meanwhile land, and
    # every index file written counts and holds every key of its log,
    # as a full replay (the pure kernel's reader) has them.
    monkeypatch.setattr(_settings, "INDEX_MIN_TAIL", 1 << 14)  # an index file at most syncs
    for module, name in [(_index_file, "capacity_for"), (_index_file, "encode_header"),
                         (_index_file, "install"), (_compaction, "install_compacted")]:
        monkeypatch.setattr(module, name, letting_other_threads_run(getattr(module, name)))
    database = dbopen(dbpath, "n", buffer_size=buffer_size)
    database.update((b"base-%d" % number, b"v") for number in range(5_000))
    written = [[] for _ in range(3)]
    done = threading.Event()

    def writer(number):
        while not done.is_set():
            key = b"%d-%d" % (number, len(written[number]))
            database[key] = b"w" * 100
            written[number].append(key)

    threads = [threading.Thread(target=writer, args=(number,)) for number in range(3)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for thread in threads:
            thread.start()
        for _ in range(6):
            getattr(database, operation)()
            with dbopen(dbpath, "r") as reader:
                assert len(reader) == len(reader.keys())
    finally:
        done.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(switch)
    assert all(written), [len(keys) for keys in written]  # each writer wrote beside the operation
    expected = {key for keys in written for key in keys}
    expected.update(b"base-%d" % number for number in range(5_000))
    with dbopen(dbpath, "r") as reader, db.open_with(_pure, dbpath, "r") as replayed:
        assert set(reader.keys()) == set(replayed.keys())
        assert len(reader) == len(replayed)
    database.close()
    with dbopen(dbpath, verify_checksums=True) as again:
        assert len(again) == len(expected)
        assert [key for key in expected if key not in again] == []


ITEMS_BESIDE_A_WRITER = """
import threading

class Cycle:
    # Garbage in a reference cycle whose finalizer runs Python code and leaves more behind.
    def __init__(self):
        self.me = self

    def __del__(self):
        sum(range(200))
        Cycle()

database = semidbm.open(path, "c")
database.update({b"k%07d" % number: b"v" for number in range(50_000)})
stop = threading.Event()

def write():
    written = 0
    while not stop.is_set():
        database[b"w%d" % written] = b""
        written += 1

writer = threading.Thread(target=write)
writer.start()
Cycle()
try:
    for _ in range(3):
        pairs = database.items()
        keys = [key for key, _ in pairs]
        assert len(set(keys)) == len(keys)
        assert sum(key.startswith(b"k") for key in keys) == 50_000
        assert len(database.items(prefix=b"k")) == 50_000
finally:
    stop.set()
    writer.join()
    gc.collect()
    database.close()
"""


def test_items_beside_a_writer_thread_while_finalizers_run(kernel, dbpath):
    # The compiled kernel made each (key, value) pair as it read the index: a tuple may start
    # a collection, whose finalizers let another thread in to write. items() then went on
    # over a changed table, for ever while that thread wrote (the child timed out), and
    # items(prefix=...) found the keys changed (RuntimeError), where the keys are taken at
    # once, "before or after, never in the middle" (docs/ordered.md). Pairs are made once
    # every key and value is read.
    run(kernel, ITEMS_BESIDE_A_WRITER, dbpath)
