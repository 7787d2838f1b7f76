"""Shared writers' mutex turns (glibc): lock.write's robust mutex, the end it publishes, who
may make it anew, and the threads that hold it (docs/FORMAT.md, "Shared writers").

Each guard's test names the mutation it kills.
"""

import errno
import os
import signal
import sys
import threading
import time

import pytest

import semidbm
from semidbm import _lock, _pure, _turn_mutex
from semidbm.format import WRITE_LOCK_NAME

from .support.shared import (
    HOLDER,
    contents,
    in_c,
    lock_write,
    lock_write_raw,
    locked_block,
    put_or_error,
    start,
    stranded_block,
    turn_is_free,
)
from .support.threads import Worker

pytestmark = pytest.mark.skipif(not _turn_mutex.available(), reason="turns are an flock here")


def test_a_turn_in_c_publishes_the_data_files_end_and_a_turn_in_python_unpublishes_it(
    kernel, dbopen, dbpath
):
    with dbopen(dbpath, "cm") as database:
        (count, kind, holder, end, end_count, known), raw = lock_write(dbpath)
        assert (kind, holder, known, len(raw)) == (_turn_mutex.KIND, 0, 0, _turn_mutex.SIZE)
        database[b"a"] = b"1"
        (count, kind, holder, end, end_count, known), _ = lock_write(dbpath)
        if in_c(kernel):
            size = os.path.getsize(os.path.join(dbpath, "data"))
            assert (holder, end, end_count, known) == (0, size, count, 1)
        else:
            assert known == 0
        with database.locked():
            assert lock_write(dbpath)[0][2:] == (os.getpid(), end, end_count, 0)
        assert lock_write(dbpath)[0][5] == 0


def test_a_turn_in_python_makes_the_next_turn_in_c_look_at_the_file(kernel, dbopen, dbpath):
    """Kills the mutation that leaves the end published across a turn in Python: the next turn in
    C would take it for the file's end and miss the record written in Python."""
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        first[b"a"] = b"1"  # published, by the compiled kernel
        with second.locked():
            second[b"b"] = b"2"
        first[b"c"] = b"3"
        assert first[b"b"] == b"2"
    assert contents(kernel, dbpath) == {b"a": b"1", b"b": b"2", b"c": b"3"}


#: Takes lock.write's mutex as a turn in C does, finding the data file's end published (as the
#: last turn in C leaves it), appends a whole record, and dies before it publishes the new end.
DIES_BEFORE_PUBLISHING = """
import struct, zlib
from semidbm import _turn_mutex
with semidbm.open(path, "wm") as db:
    db[b"first"] = b"1"
fd = os.open(os.path.join(path, "lock.write"), os.O_RDWR)
turns = _turn_mutex.TurnMutex(fd)
assert turns.take()
data = os.path.join(path, "data")
count = struct.unpack("=Q", os.pread(fd, 8, 0))[0]
os.pwrite(fd, struct.pack("=QQI", os.path.getsize(data), count, 1), 16)
record = b"child" + b"2"
with open(data, "ab") as log:
    log.write(struct.pack(">ii", 5, 1) + record + struct.pack(">I", zlib.crc32(record)))
os.kill(os.getpid(), 9)
"""


def test_a_holder_that_died_unpublishes_the_end(kernel, dbopen, dbpath):
    """Kills the mutation that keeps the published end when the mutex's holder died: the dead may
    have written past it, and the next turn in C would miss that."""
    with dbopen(dbpath, "cm") as writer:
        writer[b"mine"] = b"1"
        child = start(kernel, DIES_BEFORE_PUBLISHING, dbpath)
        child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL
        writer[b"next"] = b"1"
        assert writer[b"child"] == b"2"
    assert contents(kernel, dbpath) == {
        b"mine": b"1", b"first": b"1", b"child": b"2", b"next": b"1"
    }


def test_a_mutex_left_taken_by_writers_gone_is_made_anew_by_the_first_to_open(
    kernel, dbopen, dbpath
):
    """lock.write as a restarted machine finds it: its mutex taken by a thread that no longer
    exists. Kills the mutation that joins such a mutex without making it anew when alone: every
    turn would wait for it."""
    dbopen(dbpath, "c").close()
    with start(kernel, HOLDER, dbpath) as child:
        assert child.stdout.readline().startswith("held")
        _, taken = lock_write(dbpath)  # the mutex, taken by the child's thread
        child.stdin.close()
        assert child.wait(timeout=60) == 0
    with open(os.path.join(dbpath, WRITE_LOCK_NAME), "r+b") as lock_file:
        lock_file.write(taken)
    with dbopen(dbpath, "wm", lock_timeout=1) as database:
        database[b"k"] = b"v"
        assert database[b"holder"] == b"1"


def test_a_writer_joins_flock_turns_where_it_finds_them(kernel, dbopen, dbpath):
    """lock.write of 8 bytes, its kind 0, and a writer in a turn: writers whose turns are an flock
    (an earlier semidbm, or a filesystem that cannot map lock.write). A writer that joins them
    waits for that turn within its lock_timeout (well past the 0.1 s a writer's open waits for
    ``lock``), takes flock turns too, in Python and in C, and holds no lock on lock.write
    between turns."""
    dbopen(dbpath, "c").close()
    with open(os.path.join(dbpath, WRITE_LOCK_NAME), "wb") as lock_file:
        lock_file.write(bytes(8))
    fd = os.open(os.path.join(dbpath, WRITE_LOCK_NAME), os.O_RDWR)
    try:
        assert _lock._try_lock(fd, shared=False)  # the other writer's turn
        opened = []
        opener = threading.Thread(target=lambda: opened.append(dbopen(dbpath, "wm")))
        opener.start()
        time.sleep(0.3)
        _lock._unlock(fd)
        opener.join()
        database = opened[0]
        database[b"a"] = b"1"
        assert _lock._try_lock(fd, shared=False)  # a turn of the other writer again: it waits
        outcome = []
        waiter = threading.Thread(target=lambda: outcome.append(put_or_error(database, b"b")))
        waiter.start()
        time.sleep(0.05)
        assert not outcome
        _lock._unlock(fd)
        waiter.join()
        assert outcome == [None]
    finally:
        os.close(fd)
    database.close()
    assert len(lock_write_raw(dbpath)) == 8
    assert contents(kernel, dbpath) == {b"a": b"1", b"b": b"1"}


def test_a_flock_writer_never_takes_a_mutex_made_after_it_joined(kernel, dbopen, dbpath):
    """A writer that joined flock turns holds no shared lock on lock.write, so a writer that
    opens next finds itself alone and makes a mutex there. The first must go on with flock
    turns, which the second's shared lock keeps waiting: kills the mutation by which a turn in C
    chooses the kind from lock.write (it would take the mutex without being counted a member,
    and a third writer could make the mutex anew under its turn)."""
    dbopen(dbpath, "c").close()
    with open(os.path.join(dbpath, WRITE_LOCK_NAME), "wb") as lock_file:
        lock_file.write(bytes(8))
    fd = os.open(os.path.join(dbpath, WRITE_LOCK_NAME), os.O_RDWR)
    assert _lock._try_lock(fd, shared=False)  # another writer's flock turn, as the first opens
    threading.Timer(0.05, _lock._unlock, (fd,)).start()
    first = dbopen(dbpath, "wm", lock_timeout=0.2)
    os.close(fd)
    second = dbopen(dbpath, "wm")
    assert lock_write(dbpath)[0][1] == _turn_mutex.KIND
    with pytest.raises(semidbm.error) as raised:
        first[b"a"] = b"1"
    assert raised.value.errno == errno.ETIMEDOUT
    second[b"b"] = b"2"
    second.close()
    first[b"a"] = b"1"  # the second is gone: the flock turn is free again
    first.close()
    assert contents(kernel, dbpath) == {b"a": b"1", b"b": b"2"}


def test_a_refused_open_inside_a_turn_leaves_that_turn_held(dbopen, dbpath):
    """A second handle opened by a thread inside a turn of the first is refused (EDEADLK); its
    cleanup must not give back the first's mutex, which the thread holds through the first:
    kills the mutation by which a lock gives back any mutex its thread holds."""
    with dbopen(dbpath, "cm") as database:
        with database.locked():
            database[b"a"] = b"1"
            with pytest.raises(semidbm.error) as raised:
                dbopen(dbpath, "wm")
            assert raised.value.errno == errno.EDEADLK
            assert not turn_is_free(dbpath)
        assert turn_is_free(dbpath)
        assert database[b"a"] == b"1"


def test_a_signals_exception_just_after_the_mutex_is_taken_gives_it_back(
    kernel, dbopen, dbpath, monkeypatch
):
    """An exception (a signal handler's) that lands after the mutex is taken in Python, before
    the turn began: the mutex is given back, and this thread and others go on. Kills the
    mutation that lets the wait's exception leave the mutex taken (every later turn would
    wait for it until the thread ends)."""
    database = dbopen(dbpath, "cm", lock_timeout=0.3)
    take = _turn_mutex.TurnMutex.take

    def take_then_interrupt(turns):
        monkeypatch.setattr(_turn_mutex.TurnMutex, "take", take)
        assert take(turns)
        raise KeyboardInterrupt

    monkeypatch.setattr(_turn_mutex.TurnMutex, "take", take_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        database.sync()
    assert turn_is_free(dbpath)
    database[b"k"] = b"v"
    database.close()
    assert contents(kernel, dbpath) == {b"k": b"v"}


#: A turn stranded in thread T1 (its locked() block ended by the main thread); the handle's
#: close by the main thread times out waiting for it; then T1 takes a turn of another database
#: (glibc links the robust mutexes a thread holds through the mutexes themselves) and a new
#: writer of the first database waits for T1's mutex, which T1 gives back when it ends.
STRANDED_CLOSE = """
import threading
first = semidbm.open(os.path.join(path, "one"), "cm", lock_timeout=0.3)
other = semidbm.open(os.path.join(path, "two"), "cm")
blocks, go = [], threading.Event()
def in_a_turn():
    with first.locked():
        yield
def t1():
    block = in_a_turn()
    next(block)
    blocks.append(block)
    go.wait()
    with other.locked():
        other[b"k"] = b"v"
thread = threading.Thread(target=t1)
thread.start()
while not blocks:
    pass
blocks[0].close()  # stranded in T1
try:
    first.close()
except semidbm.error as exc:
    print("close", exc.errno, flush=True)
go.set()
thread.join()
print("T1 done", flush=True)
"""


def test_closing_a_handle_whose_mutex_another_thread_holds_keeps_its_map(kernel, dbpath):
    """Kills the mutation that unmaps lock.write (or drops the shared lock on it) while a thread
    of the process holds its mutex: that thread's next robust mutex writes into the map (a
    crash), and a writer opening alone would make the held mutex anew."""
    os.makedirs(dbpath)
    child = start(kernel, STRANDED_CLOSE, dbpath)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 0, stderr
    assert stdout.split("\n")[:2] == ["close %d" % errno.ETIMEDOUT, "T1 done"]
    with semidbm.open(os.path.join(dbpath, "one"), "wm") as database:  # T1 has ended
        database[b"k"] = b"v"


def test_a_thread_given_the_id_of_a_stranded_turns_ended_thread_takes_the_turn(dbopen, dbpath):
    """Thread ids of ended threads are given to new ones. Kills the mutation that lets a thread
    whose id is a stranded turn's go on with that turn without checking that it holds the
    mutex: it would write while another process holds the turn."""
    database = dbopen(dbpath, "cm", lock_timeout=0.3)
    worker = Worker()
    stranded_block(database, worker)
    worker.stop()  # the mutex goes with its thread
    database._lock._stranded = threading.get_native_id()  # as if this thread had that id
    with start(_pure, HOLDER, dbpath) as child:
        assert child.stdout.readline().startswith("held")
        with pytest.raises(semidbm.error) as raised:
            with database.locked():
                pass
        assert raised.value.errno == errno.ETIMEDOUT
        child.stdin.close()
        assert child.wait(timeout=60) == 0
    database[b"k"] = b"v"
    database.close()


def test_another_threads_failed_try_keeps_the_stranded_turns_taker(dbopen, dbpath):
    """A stranded turn's thread takes it over and strands it again; the writes of the second
    block are written. Kills the mutation by which another thread's failed try forgets who
    took the mutex (the block's end would then take its thread for dead)."""
    database = dbopen(dbpath, "cm", lock_timeout=0.2)
    worker = Worker()
    try:
        stranded_block(database, worker)
        assert put_or_error(database, b"other").errno == errno.ETIMEDOUT
        generator = locked_block(database, b"second")
        worker.run(lambda: next(generator))
        generator.close()  # stranded again: written, since its thread holds the mutex
        with dbopen(dbpath) as reader:
            assert reader[b"second"] == b"1"
    finally:
        worker.stop()
    database[b"after"] = b"1"
    database.close()


def test_a_map_kept_for_a_stranded_mutex_goes_once_its_thread_has_ended(dbopen, dbpath):
    """Closing a handle whose mutex a live thread holds keeps lock.write mapped and open (that
    thread's robust list points into the map); the next open or close lets go of it once the
    thread has ended. Kills the mutation that never lets go of kept maps."""
    database = dbopen(dbpath, "cm", lock_timeout=0.2)
    worker = Worker()
    stranded_block(database, worker)
    database._lock.release()  # as the handle's close does once it has had its turn
    assert len(_lock._kept_maps) == 1
    worker.stop()
    with dbopen(dbpath, "wm") as other:
        other[b"k"] = b"v"
    assert _lock._kept_maps == []
    database.close()


def test_closing_while_another_thread_is_in_a_turn_lets_that_thread_give_it_back(
    dbopen, dbpath
):
    """close() that cannot have its turn (another thread holds it) closes without writing; the
    other thread, ending its turn, gives the mutex back and lets go of the files. Kills the
    mutation that closes the files under that thread (its mutex would stay taken while it
    lives, and its leave would fail)."""
    database = dbopen(dbpath, "cm", lock_timeout=0.2)
    worker = Worker()
    try:
        stranded = database.locked()
        worker.run(stranded.__enter__)
        with pytest.raises(semidbm.error) as raised:
            database.close()
        assert raised.value.errno == errno.ETIMEDOUT
        worker.run(lambda: stranded.__exit__(None, None, None))
    finally:
        worker.stop()
    assert turn_is_free(dbpath)
    with dbopen(dbpath, "wm", lock_timeout=0.2) as other:
        other[b"k"] = b"v"
    assert _lock._kept_maps == []


def test_a_handler_that_writes_through_another_handle_inside_a_take_is_refused_at_once(
    dbopen, dbpath, monkeypatch
):
    """A signal's handler (or a finalizer) that writes through another handle while this thread
    takes the mutex for the first: refused at once (EDEADLK), and the first's take is given
    back as the exception ends it. Kills the mutations that let the second take the first's
    mutex over, or wait for it until its timeout."""
    first = dbopen(dbpath, "cm", lock_timeout=5)
    second = dbopen(dbpath, "wm", lock_timeout=5)
    take = _turn_mutex.TurnMutex.take

    def take_then_write(turns):
        monkeypatch.setattr(_turn_mutex.TurnMutex, "take", take)
        assert take(turns)
        second[b"from the handler"] = b"1"

    monkeypatch.setattr(_turn_mutex.TurnMutex, "take", take_then_write)
    started = time.monotonic()
    with pytest.raises(semidbm.error) as raised:
        with first.locked():
            pass
    assert raised.value.errno == errno.EDEADLK and time.monotonic() - started < 4
    assert turn_is_free(dbpath)
    first[b"k"] = b"v"
    second.close()
    first.close()


def test_joining_writers_whose_mutex_is_laid_out_otherwise_is_refused(dbopen, dbpath):
    """A shared flock on lock.write stands for a member whose mutex is of another kind. Kills the
    mutation that joins whatever kind lock.write holds."""
    with dbopen(dbpath, "cm"):
        pass
    _, raw = lock_write(dbpath)
    with open(os.path.join(dbpath, WRITE_LOCK_NAME), "r+b") as lock_file:
        lock_file.seek(8)
        lock_file.write((_turn_mutex.KIND ^ 0xC).to_bytes(4, sys.byteorder))
    fd = os.open(os.path.join(dbpath, WRITE_LOCK_NAME), os.O_RDWR)
    try:
        assert _lock._try_lock(fd, shared=True)
        with pytest.raises(semidbm.error, match="take turns another way"):
            dbopen(dbpath, "wm")
    finally:
        os.close(fd)
    with dbopen(dbpath, "wm") as database:  # alone now: it makes the mutex anew
        database[b"k"] = b"v"
    assert lock_write(dbpath)[0][1] == _turn_mutex.KIND
