"""Shared writers (flags 'wm' and 'cm'): turns, catching up, refusals, waits and failures.

Two handles in one process are two writers to the operating system
(each has its own open files, so their locks exclude each other): most
interleavings run so, step by step. What needs processes (a counter
incremented from four of them, a holder killed or stopped inside its
turn, fork) runs real ones (``subprocess``, ``multiprocessing``).
"""

import contextlib
import errno
import os
import signal
import sys
import threading
import time
import warnings

import pytest

import semidbm
from semidbm import _files, _lock, _pure, _turn_mutex, db
from semidbm.format import WRITE_LOCK_NAME

from .conftest import kernel_name
from .support.shared import (
    HOLDER,
    contents,
    in_c,
    locked_block,
    mutex_holder,
    put_or_error,
    start,
    turn_is_free,
)

posix_only = pytest.mark.skipif(os.name != "posix", reason="shared writers need flock")
pytestmark = posix_only


# --- flags and options ---


@pytest.mark.parametrize("flag", ["nm", "rm", "mw", "m", "wmm", "cw"])
def test_unknown_shared_flags_are_refused_before_the_disk_is_touched(dbopen, dbpath, flag):
    with pytest.raises(ValueError, match="'wm' or 'cm'"):
        dbopen(dbpath, flag)
    assert not os.path.exists(dbpath)


def test_wm_needs_an_existing_database_and_cm_creates_one(dbopen, dbpath):
    with pytest.raises(semidbm.error) as raised:
        dbopen(dbpath, "wm")
    assert raised.value.errno == errno.ENOENT
    with dbopen(dbpath, "cm") as database:
        database[b"k"] = b"v"
    assert sorted(os.listdir(dbpath)) == ["data", "lock", WRITE_LOCK_NAME]
    with dbopen(dbpath, "wm") as database:
        assert database[b"k"] == b"v"


@pytest.mark.parametrize(
    "timeout, error",
    [("1", TypeError), (True, TypeError), (-1, ValueError), (float("nan"), ValueError)],
)
def test_bad_lock_timeouts_are_refused(dbopen, dbpath, timeout, error):
    with pytest.raises(error, match="lock_timeout"):
        dbopen(dbpath, "cm", lock_timeout=timeout)
    assert not os.path.exists(dbpath)


def test_exclusive_and_shared_writers_refuse_each_other_by_name(dbopen, dbpath):
    with dbopen(dbpath, "c"):
        with pytest.raises(semidbm.error, match=r"another writer \(this process: "):
            dbopen(dbpath, "cm")
    with dbopen(dbpath, "cm"), dbopen(dbpath, "wm"):
        with pytest.raises(semidbm.error, match="open by shared writers") as raised:
            dbopen(dbpath, "w")
        assert raised.value.errno == errno.EAGAIN
    dbopen(dbpath, "w").close()  # both gone: the exclusive writer gets in


def test_a_readers_probe_sees_a_shared_writer(dbopen, dbpath):
    dbopen(dbpath, "c").close()
    assert not _lock.writer_active(dbpath)
    with dbopen(dbpath, "cm"):
        assert _lock.writer_active(dbpath)
    assert not _lock.writer_active(dbpath)


def test_locked_is_for_shared_writers_only(database):
    with pytest.raises(semidbm.error, match="not a shared writer"):
        with database.locked():
            pass


@pytest.mark.parametrize("shared_open", [True, False], ids=["still-open", "closed"])
def test_an_exclusive_creation_keeps_what_shared_writers_wrote_meanwhile(
    dbopen, dbpath, monkeypatch, shared_open
):
    """'c' makes the directory, and a shared writer joins and writes before 'c' locks it.

    Before: the exclusive writer wrote a new empty data file over the
    shared writer's once it had closed, or, refused while it was open,
    removed the database it wrote.
    """
    locking = _lock.WriterLock.__init__
    made, joined = threading.Event(), threading.Event()

    def slow_lock(self, directory, mode):
        made.set()
        joined.wait(60)
        locking(self, directory, mode)

    monkeypatch.setattr(_lock.WriterLock, "__init__", slow_lock)
    outcome = []
    creator = threading.Thread(target=lambda: outcome.append(_open_or_error(dbopen, dbpath)))
    creator.start()
    made.wait(60)
    shared = dbopen(dbpath, "cm")
    shared[b"k"] = b"v"
    if not shared_open:
        shared.close()
    joined.set()
    creator.join()
    if shared_open:
        assert "open by shared writers" in str(outcome[0])  # refused, and removed nothing
        shared.close()
    else:
        outcome[0].close()  # it found the data file, and kept it
    assert contents(_pure, dbpath) == {b"k": b"v"}


def _open_or_error(dbopen, path):
    """``dbopen(path, "c")``, or the error it raised."""
    try:
        return dbopen(path, "c")
    except semidbm.error as exc:
        return exc


def test_closing_needs_no_turn_when_the_catch_up_fails(dbopen, dbpath):
    writer = dbopen(dbpath, "cm")
    writer[b"k"] = b"v"
    os.remove(os.path.join(dbpath, "data"))
    with pytest.raises(semidbm.error, match="cannot catch up"):
        writer.close()
    assert writer.closed
    writer.close()  # closed: nothing to do
    dbopen(dbpath, "c").close()  # its locks are gone with it


# --- turns: what each writer sees ---


def test_each_operation_catches_up_and_reads_answer_from_the_last_turn(dbopen, dbpath):
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        first[b"a"] = b"1"
        assert b"a" not in second  # reads take no turn
        second.refresh()
        assert second[b"a"] == b"1"
        del second[b"a"]
        assert first[b"a"] == b"1"  # until its next turn
        with pytest.raises(KeyError):
            del first[b"a"]  # the turn caught up first: nothing is written
        assert b"a" not in first
        second[b"b"] = b"2"
        first[b"c"] = b"3"  # in its turn, after second's record
        assert first[b"b"] == b"2"
        assert first.pop(b"b") == b"2"
        assert first.setdefault(b"d", b"4") == b"4"
        second.update({b"e": b"5"}, f=b"6")
        second.delete_many([b"c"])
        first.refresh()
        assert dict(first.items()) == {b"d": b"4", b"e": b"5", b"f": b"6"}
        assert dict(second.items()) == {b"d": b"4", b"e": b"5", b"f": b"6"}


def test_a_reader_sees_each_turn_once_it_returns(dbopen, dbpath):
    with dbopen(dbpath, "cm") as writer, dbopen(dbpath) as reader:
        writer[b"k"] = b"v"  # no sync: the turn wrote it to the file
        reader.refresh()
        assert reader[b"k"] == b"v"


def test_a_compaction_by_one_writer_loses_and_revives_nothing_for_another(kernel, dbopen, dbpath):
    model = {}
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        for number in range(200):
            writer = first if number % 2 else second
            key = b"k%d" % (number % 50)
            writer[key] = model[key] = b"v%d" % number
        for number in range(0, 50, 3):
            del second[b"k%d" % number]
            del model[b"k%d" % number]
        first.compact()
        second[b"after"] = model[b"after"] = b"1"  # its file was replaced: it follows
        with pytest.raises(KeyError):
            del second[b"k0"]  # deleted before the compaction: stays deleted
        first.compact()
        first.sync()
        second.sync()
        assert dict(second.items()) == model
    for reader_kernel in (_pure, kernel):
        assert contents(reader_kernel, dbpath) == model


def test_a_compaction_is_followed_when_the_old_file_keeps_another_name(kernel, dbopen, dbpath):
    """A backup's hard link leaves the replaced file one link: the turn looks at the name.

    (Catching up by the open file's link count alone, this test's write
    went to the backup.)
    """
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        first[b"a"] = b"1"
        os.link(os.path.join(dbpath, "data"), os.path.join(dbpath, "backup"))
        first.compact()
        second[b"b"] = b"2"
    assert contents(kernel, dbpath) == {b"a": b"1", b"b": b"2"}


def test_batches_hold_one_turn_and_commit_once(dbopen, dbpath):
    first = dbopen(dbpath, "cm", format=2, lock_timeout=0.05)
    with first, dbopen(dbpath, "wm") as second:
        first[b"n"] = b"1"
        with second.batch() as batch:
            # The turn began by catching up: the read is current.
            batch[b"n"] = b"%d" % (int(second[b"n"]) + 1)
            batch[b"m"] = b"x"
            with pytest.raises(semidbm.error, match="it would wait for itself") as raised:
                first[b"z"] = b"1"  # this thread holds the turn, through second
            assert raised.value.errno == errno.EDEADLK
        first.refresh()
        assert first[b"n"] == b"2" and first[b"m"] == b"x"
        with pytest.raises(ZeroDivisionError):
            with second.batch() as batch:
                batch[b"n"] = b"lost"
                raise ZeroDivisionError
        first[b"after"] = b"1"  # the failed batch ended its turn
        assert first[b"n"] == b"2"


@contextlib.contextmanager
def turn_held_by_another_thread(database):
    """A thread in a ``locked()`` block of ``database`` (having put b"a"), until the block ends."""
    held, done = threading.Event(), threading.Event()

    def hold():
        with database.locked():
            database[b"a"] = b"1"
            held.set()
            done.wait(60)

    thread = threading.Thread(target=hold)
    thread.start()
    held.wait(60)
    try:
        yield
    finally:
        done.set()
        thread.join()


def test_lock_timeout_names_the_holder(dbopen, dbpath):
    with dbopen(dbpath, "cm") as holder, dbopen(dbpath, "wm", lock_timeout=0.05) as waiter:
        with turn_held_by_another_thread(holder):
            with pytest.raises(semidbm.error, match="process %d" % os.getpid()) as raised:
                waiter[b"b"] = b"2"
            assert raised.value.errno == errno.ETIMEDOUT
        waiter[b"b"] = b"2"
        assert waiter[b"a"] == b"1"


def test_threads_wait_for_each_others_turns_within_the_timeout(dbopen, dbpath):
    with dbopen(dbpath, "cm", lock_timeout=0.05) as database:
        with turn_held_by_another_thread(database):
            with pytest.raises(semidbm.error) as raised:
                database[b"k"] = b"v"
            assert raised.value.errno == errno.ETIMEDOUT
        database[b"k"] = b"v"


def test_a_turn_may_end_in_another_thread(dbopen, dbpath):
    """A generator suspended in a locked() block, closed by another thread, ends the turn: its
    writes are written. Where the turn is ``lock.write``'s mutex, the thread that began it holds
    the mutex until its next turn, which takes it over; until then other turns wait."""
    database = dbopen(dbpath, "cm", lock_timeout=0.3)
    block = locked_block(database, b"in the block")
    next(block)  # the main thread's turn
    thread = threading.Thread(target=block.close)
    thread.start()
    thread.join()
    with dbopen(dbpath) as reader:
        assert reader[b"in the block"] == b"1"
    outcome = []
    other = threading.Thread(target=lambda: outcome.append(put_or_error(database, b"other")))
    other.start()
    other.join()
    if _turn_mutex.available():
        assert outcome[0].errno == errno.ETIMEDOUT
        assert "process %d" % os.getpid() in str(outcome[0])
    database[b"k"] = b"v"  # a turn of its own, written when it returns
    other = threading.Thread(target=lambda: outcome.append(put_or_error(database, b"other")))
    other.start()
    other.join()
    assert outcome[-1] is None
    with dbopen(dbpath) as reader:
        assert reader[b"k"] == b"v" and reader[b"other"] == b"1"
    database.close()


@posix_only
def test_a_turn_whose_thread_ended_cannot_write_what_it_buffered(dbopen, dbpath):
    """A locked() block begun by a thread that has ended since, closed by another: the mutex
    went with the thread, so the block's writes are not written, the handle turns read-only, and
    the error says so. Other writers go on."""
    database = dbopen(dbpath, "cm", lock_timeout=1)
    block = locked_block(database, b"lost")
    thread = threading.Thread(target=next, args=(block,))
    thread.start()
    thread.join()
    # join() returns before the system's thread is gone, and with it the mutex's holder.
    deadline = time.monotonic() + 30
    while _turn_mutex.available() and mutex_holder(dbpath) == thread.native_id:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    if not _turn_mutex.available():  # an flock is the open file's: any thread ends the turn
        block.close()
        assert contents(_pure, dbpath) == {b"lost": b"1"}
        database.close()
        return
    with pytest.raises(semidbm.error) as raised:
        block.close()
    assert raised.value.errno == errno.EOWNERDEAD
    with pytest.raises(semidbm.error):
        database[b"after"] = b"1"
    database.close()
    with dbopen(dbpath, "wm") as other:
        other[b"k"] = b"v"
    assert contents(_pure, dbpath) == {b"k": b"v"}


@pytest.mark.parametrize("after_the_write", [True, False], ids=["after", "before"])
def test_an_exception_in_the_write_of_a_turn_leaves_no_buffer_behind(
    dbpath, monkeypatch, after_the_write
):
    """An exception from a signal handler in the pure kernel's last write of a turn.

    Landing after the bytes reached the file, the write stands; before,
    the turn's changes are dropped. Either way nothing stays buffered past
    the turn (before: the buffer was written again at the next turn,
    after another writer's newer value, which it undid).
    """
    written = _files.write_all
    armed = []

    def write_all(fd, data):
        if armed and not after_the_write:
            armed.clear()
            raise KeyboardInterrupt
        written(fd, data)
        if armed:
            armed.clear()
            raise KeyboardInterrupt

    monkeypatch.setattr(_files, "write_all", write_all)
    with db.open_with(_pure, dbpath, "cm") as first, db.open_with(
        _pure, dbpath, "wm"
    ) as second:
        armed.append(True)
        with pytest.raises(KeyboardInterrupt):
            first[b"k"] = b"old"
        second[b"k"] = b"new"
        first[b"x"] = b"1"  # the next turn writes only its own record
        assert contents(_pure, dbpath) == {b"k": b"new", b"x": b"1"}


# --- processes ---

#: Increments the counter b"n" argv[3] times, in batches (format 2) or locked() blocks.
COUNTER = """
import semidbm
how, times = sys.argv[3], int(sys.argv[4])
with semidbm.open(path, "wm") as db:
    for _ in range(times):
        if how == "batch":
            with db.batch() as batch:
                batch[b"n"] = b"%d" % (int(db[b"n"]) + 1)
        else:
            with db.locked():
                db[b"n"] = b"%d" % (int(db[b"n"]) + 1)
"""


@pytest.mark.parametrize("how", ["batch", "locked"])
def test_four_processes_increment_one_counter_exactly(kernel, dbopen, dbpath, how):
    times = 10_000 if kernel_name(kernel) == "cython" and how == "batch" else 2_500
    with dbopen(dbpath, "cm", format=2 if how == "batch" else 1) as database:
        database[b"n"] = b"0"
    children = [start(kernel, COUNTER, dbpath, how, times) for _ in range(4)]
    for child in children:
        _, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, stderr
    assert contents(kernel, dbpath)[b"n"] == b"%d" % (4 * times)


def test_a_stopped_holder_makes_others_wait_and_a_killed_one_does_not(kernel, dbopen, dbpath):
    # Opening takes a turn too: the waiter opens before the holder takes its turn.
    waiter = dbopen(dbpath, "cm", lock_timeout=0.2)
    with start(kernel, HOLDER, dbpath) as child:
        assert child.stdout.readline().split() == ["held", str(child.pid)]
        os.kill(child.pid, signal.SIGSTOP)
        with pytest.raises(semidbm.error, match="process %d" % child.pid) as raised:
            waiter[b"k"] = b"1"
        assert raised.value.errno == errno.ETIMEDOUT
        os.kill(child.pid, signal.SIGCONT)
        child.stdin.close()  # the holder ends its turn and closes
        assert child.wait(timeout=60) == 0
    waiter[b"k"] = b"1"
    assert waiter[b"holder"] == b"1"
    with start(kernel, HOLDER.replace('b"holder"', 'b"lost"'), dbpath) as second:
        assert second.stdout.readline().startswith("held")
        second.kill()
    waiter[b"after"] = b"1"  # the killed holder's lock went with it
    # Its turn's write was still in its buffer: lost, as it never returned.
    assert dict(waiter.items()) == {b"holder": b"1", b"k": b"1", b"after": b"1"}
    waiter.close()


#: Takes a turn, appends the first half of a record to the data file and dies inside the turn.
TORN = """
import semidbm
from semidbm import format
with semidbm.open(path, "wm") as db:
    with db.locked():
        fd = os.open(os.path.join(path, "data"), os.O_WRONLY | os.O_APPEND)
        os.write(fd, (5).to_bytes(4, "big") + (5).to_bytes(4, "big") + b"hal")
        os.kill(os.getpid(), 9)
"""


def test_the_next_turn_cuts_the_torn_tail_of_a_holder_that_died_in_its_turn(
    kernel, dbopen, dbpath
):
    with dbopen(dbpath, "cm") as writer:
        writer[b"kept"] = b"1"
        size = os.path.getsize(os.path.join(dbpath, "data"))
        child = start(kernel, TORN, dbpath)
        child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL
        assert os.path.getsize(os.path.join(dbpath, "data")) == size + 11
        with pytest.warns(semidbm.TornTailWarning, match="11 bytes"):
            writer[b"next"] = b"2"
    assert contents(kernel, dbpath) == {b"kept": b"1", b"next": b"2"}
    assert os.path.exists(os.path.join(dbpath, "data.torn-%d" % size))


def test_a_forked_child_may_read_a_shared_writer_but_not_write(dbopen, dbpath):
    with dbopen(dbpath, "cm") as database:
        database[b"k"] = b"v"
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            try:
                ok = database[b"k"] == b"v"
                try:
                    database[b"x"] = b"y"
                except semidbm.error as exc:
                    ok = ok and "forked child" in str(exc)
                os.write(writer, b"ok" if ok else b"no")
            finally:
                os._exit(0)
        os.close(writer)
        assert os.read(reader, 2) == b"ok"
        os.waitpid(pid, 0)
        os.close(reader)
        database[b"parent"] = b"1"  # the child's exit unlocked nothing
        assert contents(_pure, dbpath) == {b"k": b"v", b"parent": b"1"}


def test_a_failed_write_is_cut_back_and_its_turn_kept_nothing(kernel, small_disk):
    path = os.path.join(small_disk, "db")
    with db.open_with(kernel, path, "cm") as first, db.open_with(kernel, path, "wm") as second:
        first[b"before"] = b"1"
        size = os.path.getsize(os.path.join(path, "data"))
        with pytest.raises(semidbm.error) as raised:
            second.update((b"big%d" % number, bytes(500_000)) for number in range(20))
        assert raised.value.errno == errno.ENOSPC
        # What the failed turn had buffered is gone from the file and the index.
        kept = {key for key in second.keys() if key.startswith(b"big")}
        record_sizes = sum(12 + len(key) + 500_000 for key in kept)
        assert os.path.getsize(os.path.join(path, "data")) == size + record_sizes
        for key in list(kept):
            del second[key]
        first[b"after"] = b"2"
        assert dict(first.items()) == {b"before": b"1", b"after": b"2"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert contents(kernel, path) == {b"before": b"1", b"after": b"2"}


# --- single operations: the turn taken in C, and its way back to Python ---


@pytest.fixture
def python_turns(monkeypatch):
    """The turns taken in Python (``SharedLock.enter``) from now on, as a list that grows."""
    taken = []
    enter = _lock.SharedLock.enter

    def counted(lock, follow=None):
        taken.append(lock)
        return enter(lock, follow)

    monkeypatch.setattr(_lock.SharedLock, "enter", counted)
    return taken


def test_single_operations_take_their_whole_turn_in_c_in_the_usual_case(
    kernel, dbopen, dbpath, python_turns
):
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        del python_turns[:]  # opening took its turns in Python
        first[b"a"] = b"1"
        second[b"b"] = b"2"  # catches up with first's record
        first[b"a"] = b"3"
        del second[b"a"]
        with pytest.raises(KeyError):
            del first[b"a"]  # deleted by second: first caught up first
        assert turn_is_free(dbpath)
        assert len(python_turns) == (0 if in_c(kernel) else 5)
        assert dict(first.items()) == dict(second.items()) == {b"b": b"2"}
    assert contents(kernel, dbpath) == {b"b": b"2"}


def test_a_put_after_other_writers_puts_of_its_key_is_the_one_that_counts(
    kernel, dbopen, dbpath, python_turns
):
    """Each put's turn in C takes in the records other writers appended before it, in the
    log's order, then its own: an older record of the same key never wins.

    Caught by a turn that indexes its put before replaying the others'
    records (tried once, to shorten the turn), or that stops short of them.
    """
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        del python_turns[:]
        for number in range(3):
            first[b"k"] = b"first's %d" % number
            second[b"k"] = b"second's %d" % number  # after first's put of k
            assert second[b"k"] == b"second's %d" % number
            first[b"n"] = b"%d" % number  # after second's put of k
            assert first[b"k"] == b"second's %d" % number
            if number:  # second's turn caught up with first's put of n before
                assert second[b"n"] == b"%d" % (number - 1)
        assert len(python_turns) == (0 if in_c(kernel) else 9)
        second.refresh()
        expected = {b"k": b"second's 2", b"n": b"2"}
        assert dict(first.items()) == dict(second.items()) == expected
    assert contents(kernel, dbpath) == expected


def test_bulk_calls_take_their_whole_turn_in_c_in_the_usual_case(
    kernel, dbopen, dbpath, python_turns
):
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        del python_turns[:]
        first.update({b"a": b"1", b"b": b"2"}, c=b"3")
        second.update([(b"d", b"4")])  # catches up with first's records
        first.delete_many([b"a", b"d"])  # d is second's: first caught up first
        with pytest.raises(KeyError):
            second.delete_many([b"b", b"a"])  # a is gone: nothing is deleted
        assert turn_is_free(dbpath)
        if in_c(kernel):  # the pure kernel's update puts each item in a turn inside its own
            assert not python_turns
        assert dict(first.items()) == dict(second.items()) == {b"b": b"2", b"c": b"3"}
    assert contents(kernel, dbpath) == {b"b": b"2", b"c": b"3"}


def test_code_an_update_runs_is_in_its_turn_and_what_it_wrote_before_an_error_is_kept(
    kernel, dbopen, dbpath, python_turns
):
    with dbopen(dbpath, "cm") as database:
        del python_turns[:]

        def items():
            yield b"a", b"1"
            assert not turn_is_free(dbpath)
            database[b"inside"] = b"2"  # only counts in the update's turn
            yield b"b", b"3"
            raise RuntimeError("the iterator failed")

        with pytest.raises(RuntimeError, match="iterator failed"):
            database.update(items())
        assert turn_is_free(dbpath)
        if in_c(kernel):
            assert len(python_turns) == 1  # the put inside, counted in the update's
    assert contents(kernel, dbpath) == {b"a": b"1", b"inside": b"2", b"b": b"3"}


def test_a_turn_another_process_holds_is_waited_for_in_python(
    kernel, dbopen, dbpath, python_turns
):
    waiter = dbopen(dbpath, "cm", lock_timeout=0.2)
    with start(kernel, HOLDER, dbpath) as child:
        assert child.stdout.readline().startswith("held")
        del python_turns[:]
        with pytest.raises(semidbm.error) as raised:
            waiter[b"k"] = b"1"
        assert raised.value.errno == errno.ETIMEDOUT
        assert len(python_turns) == 1
        child.stdin.close()
        assert child.wait(timeout=60) == 0
    waiter[b"k"] = b"1"
    assert dict(waiter.items()) == {b"holder": b"1", b"k": b"1"}
    waiter.close()


def test_a_put_waits_for_another_threads_locked_block(kernel, dbopen, dbpath, python_turns):
    database = dbopen(dbpath, "cm")
    inside, leave = threading.Event(), threading.Event()

    def hold():
        with database.locked():
            inside.set()
            leave.wait(timeout=60)
            database[b"k"] = b"from the block"

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(timeout=60)
    del python_turns[:]
    putter = threading.Thread(target=database.__setitem__, args=(b"k", b"from the put"))
    putter.start()
    putter.join(timeout=0.2)
    assert putter.is_alive()  # it waits for the block's turn, in Python
    leave.set()
    holder.join(timeout=60)
    putter.join(timeout=60)
    assert database[b"k"] == b"from the put"
    assert len(python_turns) == 2  # the put's, and the block's put counted in the block's
    database.close()


def test_an_operation_inside_a_locked_block_keeps_the_blocks_turn(kernel, dbopen, dbpath):
    with dbopen(dbpath, "cm") as database:
        with database.locked():
            database[b"a"] = b"1"
            del database[b"a"]
            database[b"b"] = b"2"
            assert not turn_is_free(dbpath)
        assert turn_is_free(dbpath)
    assert contents(kernel, dbpath) == {b"b": b"2"}


def test_a_put_after_another_writers_compaction_follows_it_in_python(
    kernel, dbopen, dbpath, python_turns
):
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        first[b"a"] = b"1"
        # The compacted file is longer than the log first indexed: only its identity
        # tells it from first's file.
        second[b"long"] = bytes(10_000)
        second.compact()
        del python_turns[:]
        first[b"b"] = b"2"  # the data file was replaced since first's last turn
        assert len(python_turns) == 1
        first[b"c"] = b"3"
        assert len(python_turns) == (1 if in_c(kernel) else 2)
    assert contents(kernel, dbpath) == {b"a": b"1", b"long": bytes(10_000), b"b": b"2", b"c": b"3"}


def replacements(path):
    """The count of replaced data files that ``lock.write`` of the database at ``path`` holds."""
    with open(os.path.join(path, WRITE_LOCK_NAME), "rb") as lock_file:
        raw = lock_file.read()
    assert len(raw) == (_turn_mutex.SIZE if _turn_mutex.available() else 8)
    return int.from_bytes(raw[:8], sys.byteorder)


def test_each_compaction_by_a_shared_writer_is_counted_in_lock_write(kernel, dbopen, dbpath):
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        assert replacements(dbpath) == 0
        first[b"a"] = b"1"
        second.compact()
        assert replacements(dbpath) == 1
        with first.locked():
            first.compact()
        assert replacements(dbpath) == 2
        second.close(compact=True)
        assert replacements(dbpath) == 3
        first[b"b"] = b"2"  # in C for the compiled kernel: a stat finds the new file
        assert first[b"a"] == b"1"
    assert contents(kernel, dbpath) == {b"a": b"1", b"b": b"2"}


def test_an_empty_lock_write_is_grown_and_a_count_in_it_kept(kernel, dbopen, dbpath):
    dbopen(dbpath, "c").close()
    lock_path = os.path.join(dbpath, WRITE_LOCK_NAME)
    open(lock_path, "wb").close()  # as an earlier version of this one left it
    with dbopen(dbpath, "wm") as first:
        assert replacements(dbpath) == 0
        first.compact()
        with dbopen(dbpath, "wm") as second:  # the file is long enough: nothing changes
            assert replacements(dbpath) == 1
            second[b"a"] = b"1"
        first[b"b"] = b"2"
    assert contents(kernel, dbpath) == {b"a": b"1", b"b": b"2"}


def test_any_count_in_lock_write_is_checked_by_a_stat_at_a_writers_first_turn(
    kernel, dbopen, dbpath
):
    dbopen(dbpath, "c").close()
    with open(os.path.join(dbpath, WRITE_LOCK_NAME), "wb") as lock_file:
        lock_file.write((2**64 - 2).to_bytes(8, sys.byteorder))
    with dbopen(dbpath, "wm") as first, dbopen(dbpath, "wm") as second:
        second[b"a"] = b"1"
        second.compact()  # the count wraps around to all ones
        assert replacements(dbpath) == 2**64 - 1
        first[b"b"] = b"2"  # its first turn: the count it sees proves nothing yet
    assert contents(kernel, dbpath) == {b"a": b"1", b"b": b"2"}


FULL_DISK = """
filler = sys.argv[3]
with semidbm.open(path, "c") as db:
    db.update((b"k%d" % number, bytes(1000)) for number in range(100))
database = semidbm.open(path, "wm", buffer_size=0)
fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, bytes(4096))
except OSError:
    pass
os.close(fd)
database[b"put"] = b"1"  # its turn reads the count (in C: through a map)
try:
    database.compact()  # the count is written first
except semidbm.error as exc:
    print("compact:", exc.errno)
os.remove(filler)
database.close()
print("closed", flush=True)
"""


def test_a_full_disk_gives_shared_writers_errors_not_a_crash(kernel, dbpath, small_disk):
    # lock.write's count was written at the open: neither a read through a map nor a
    # write of it needs a new page on the full disk (a file only made longer did: SIGBUS).
    path = os.path.join(small_disk, "db")
    child = start(kernel, FULL_DISK, path, os.path.join(small_disk, "filler"))
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == 0, stderr
    assert stdout.splitlines() == ["compact: %d" % errno.ENOSPC, "closed"]
    assert contents(kernel, path)[b"put"] == b"1"


def test_a_bulk_call_that_writes_through_another_handle_is_refused_at_once(
    kernel, dbopen, dbpath
):
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm", lock_timeout=2) as second:

        def items():
            second[b"inside"] = b"1"  # this thread holds the turn, through first
            yield b"a", b"1"

        for call in (lambda: first.update(items()), lambda: first.delete_many(
            key for key, _ in items()
        )):
            with pytest.raises(semidbm.error) as raised:
                call()
            assert raised.value.errno == errno.EDEADLK
            assert turn_is_free(dbpath)
    assert contents(kernel, dbpath) == {}


def test_a_long_tail_of_another_writer_is_replayed_in_python(kernel, dbopen, dbpath, python_turns):
    with dbopen(dbpath, "cm") as first, dbopen(dbpath, "wm") as second:
        first[b"a"] = b"1"
        second.update((b"big%d" % number, bytes(100_000)) for number in range(50))
        del python_turns[:]
        first[b"b"] = b"2"  # 5 MB to catch up with
        assert len(python_turns) == 1
        assert len(first) == 52
    assert len(contents(kernel, dbpath)) == 52


def test_a_data_file_cut_shorter_closes_the_writer_in_its_next_turn_that_looks(
    kernel, dbopen, dbpath, python_turns
):
    """A turn in Python looks at the file; so does one in C where turns are an ``flock``. A turn
    in C that takes ``lock.write``'s mutex trusts the end that the last turn published there, as
    an exclusive writer trusts its own (FORMAT.md, "Shared writers")."""
    database = dbopen(dbpath, "cm")
    database[b"a"] = b"1"
    database[b"b"] = b"2"
    size = os.path.getsize(os.path.join(dbpath, "data"))
    os.truncate(os.path.join(dbpath, "data"), size - 5)
    del python_turns[:]
    with pytest.raises(semidbm.error, match="shorter than"):
        if in_c(kernel) and not _turn_mutex.available():
            database[b"c"] = b"3"
        with database.locked():
            pass
    assert len(python_turns) == 1
    assert database.closed
    database.close()


def test_a_torn_tail_is_cut_by_a_put_in_python(kernel, dbopen, dbpath, python_turns):
    with dbopen(dbpath, "cm") as writer:
        writer[b"kept"] = b"1"
        child = start(kernel, TORN, dbpath)
        child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL
        del python_turns[:]
        with pytest.warns(semidbm.TornTailWarning, match="11 bytes"):
            writer[b"next"] = b"2"
        assert len(python_turns) == 1
        assert writer[b"next"] == b"2"
    assert contents(kernel, dbpath) == {b"kept": b"1", b"next": b"2"}


def test_a_put_that_fills_the_disk_keeps_nothing(kernel, small_disk, python_turns):
    path = os.path.join(small_disk, "db")
    with db.open_with(kernel, path, "cm") as database:
        del python_turns[:]
        with pytest.raises(semidbm.error) as raised:
            for number in range(20):
                size = os.path.getsize(os.path.join(path, "data"))
                database[b"big%d" % number] = bytes(500_000)  # each fits the buffer
        assert raised.value.errno == errno.ENOSPC
        assert len(python_turns) == (0 if in_c(kernel) else number + 1)
        # The failed put's record is gone from the file and the index.
        assert os.path.getsize(os.path.join(path, "data")) == size
        assert b"big%d" % number not in database
        assert turn_is_free(path)
        for kept in range(number):
            del database[b"big%d" % kept]
        database[b"after"] = b"1"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert contents(kernel, path) == {b"after": b"1"}
