"""Helpers of the shared writers' tests (tests/test_shared.py, tests/test_shared_mutex.py).

Child interpreters that write beside the test, what a database holds,
and how to look at its turn: ``lock.write``'s mutex, or its ``flock``.
"""

import os
import subprocess
import sys
import textwrap
import threading

import semidbm
from semidbm import _kernel, _lock, _turn_mutex, db
from semidbm.format import WRITE_LOCK_NAME

from .child import PRELUDE, environment


def contents(kernel, path):
    """The database at ``path`` as a dict, read by a new reader on ``kernel``."""
    with db.open_with(kernel, path) as reader:
        return dict(reader.items())


def start(kernel, script, *args):
    """A child interpreter on ``kernel`` running ``script`` (after child.PRELUDE) with ``args``."""
    return subprocess.Popen(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script), _kernel.name_of(kernel)]
        + [str(arg) for arg in args],
        env=environment(kernel),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


#: Takes a turn, says "held <pid>", and keeps it until its standard input closes.
HOLDER = """
import semidbm
with semidbm.open(path, "wm") as db:
    with db.locked():
        db[b"holder"] = b"1"
        print("held", os.getpid(), flush=True)
        sys.stdin.read()
"""


def in_c(kernel):
    """Whether ``kernel`` takes a single operation's usual turn in C (the compiled one does)."""
    return _kernel.name_of(kernel) == "cython"


def turn_is_free(path):
    """Whether the turn of the database at ``path`` can be taken now (and is let go at once):
    ``lock.write``'s mutex, tried by a thread of its own (this one may hold it), or its
    ``flock`` where turns are one."""
    fd = os.open(os.path.join(path, WRITE_LOCK_NAME), os.O_RDWR)
    try:
        if not _turn_mutex.available():
            return _lock._try_lock(fd, shared=False) and _lock._unlock(fd) is None
        turns = _turn_mutex.TurnMutex(fd)
        free = []
        prober = threading.Thread(target=lambda: free.append(turns.take() and not turns.give()))
        prober.start()
        prober.join()
        turns.close()
        return free[0]
    finally:
        os.close(fd)


def lock_write_raw(path):
    """The bytes of ``lock.write`` of the database at ``path``."""
    with open(os.path.join(path, WRITE_LOCK_NAME), "rb") as lock_file:
        return lock_file.read()


def lock_write(path):
    """``lock.write`` of the database at ``path``: its fields (``LAYOUT``), and its bytes."""
    raw = lock_write_raw(path)
    return _turn_mutex.LAYOUT.unpack_from(raw), raw


def mutex_holder(path):
    """The native id of the thread that holds ``lock.write``'s mutex, or 0."""
    return _turn_mutex.holding_thread(lock_write_raw(path))


def put_or_error(database, key):
    """Put ``key`` (value b"1") in ``database``: None, or the semidbm.error it raised."""
    try:
        database[key] = b"1"
    except semidbm.error as exc:
        return exc
    return None


def locked_block(database, key=None):
    """A generator that, at its first ``next()``, enters a ``locked()`` block of ``database`` (and
    puts ``key``, if given) and stays suspended there, in its turn, until closed."""
    with database.locked():
        if key is not None:
            database[key] = b"1"
        yield


def stranded_block(database, worker):
    """A locked() block of ``database`` begun in ``worker``'s thread and ended by this one: its
    mutex stays with the worker's thread."""
    block = locked_block(database)
    worker.run(lambda: next(block))
    block.close()
