"""The writer lock under probes, at refusal, at close and across fork().

A reader's probe (``_lock.writer_active``, used by ``semidbm stats`` and
``verify`` and by a reader that finds an incomplete last record) holds
the lock for a moment; a writer opening in that moment must wait it out,
not be refused. Every case runs real processes (``subprocess``), never
mocks: the race is between processes.
"""

import os
import subprocess
import sys
import textwrap
import time

import pytest

import semidbm
from semidbm import _lock
from semidbm.format import LOCK_NAME

posix_only = pytest.mark.skipif(os.name != "posix", reason="fork is POSIX")

#: How many times the regression test opens and closes a writer.
OPENS = 8000

#: Runs in a prober process: asks whether a writer is at work on the
#: database in argv[1], as fast as it can, the way argv[2] names
#: ("writer_active": the probe itself; "stats": ``semidbm stats --json``),
#: until its standard input closes; then prints how many times it asked
#: and how many times a writer was at work.
PROBER = """
import contextlib, io, json, sys, threading
from semidbm import _lock, cli
path, how = sys.argv[1], sys.argv[2]

def ask():
    if how == "writer_active":
        return _lock.writer_active(path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["stats", "--json", path]) == 0
    return json.loads(out.getvalue())["writer_active"]

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
probes = active = 0
ask()
print("ready", flush=True)
while not stop.is_set():
    probes += 1
    active += ask()
print(probes, active, flush=True)
"""

#: Runs in a writer process: opens the database in argv[1] for writing,
#: says "ready <pid>" and closes it when its standard input closes.
WRITER = """
import os, sys
import semidbm
database = semidbm.open(sys.argv[1], "c")
print("ready %d" % os.getpid(), flush=True)
sys.stdin.read()
database.close()
"""

#: Runs in a holder process: takes the writer lock of the database in
#: argv[1], writes argv[2] (a process id, or anything else) over the
#: process id in the lock file, says "ready <pid>" and holds the lock
#: until its standard input closes.
HOLDER = """
import os, sys
from semidbm import _lock
path, content = sys.argv[1], sys.argv[2]
lock = _lock.WriterLock(path, 0o666)
with open(os.path.join(path, "lock"), "r+b") as handle:
    handle.truncate()
    handle.write(content.encode("ascii"))
print("ready %d" % os.getpid(), flush=True)
sys.stdin.read()
lock.release()
"""

#: Runs in a writer process that forks: the child lets go of the lock in
#: the way argv[2] names ("database": through semidbm's fork handler and
#: a close and exit in the child; "lock": a bare ``WriterLock.forget()``),
#: then the parent says "ready <pid>" and holds the lock until its
#: standard input closes.
FORKER = """
import gc, os, sys
import semidbm
from semidbm import _lock
path, how = sys.argv[1], sys.argv[2]
if how == "database":
    holder = semidbm.open(path, "c")
else:
    holder = _lock.WriterLock(path, 0o666)
child = os.fork()
if child == 0:
    if how == "database":
        holder.close()
        del holder
        gc.collect()
        sys.exit(0)
    holder.forget()
    os._exit(0)
_, status = os.waitpid(child, 0)
assert status == 0, status
print("ready %d" % os.getpid(), flush=True)
sys.stdin.read()
if how == "database":
    holder.close()
else:
    holder.release()
"""


def start(script, *arguments):
    """Start ``script`` in a new interpreter; return it once it printed its first line.

    Returns the ``Popen`` and that line, stripped.
    """
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, arguments)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip()
    assert line.startswith("ready"), line
    return process, line


def finish(process):
    """Close the standard input of a started process; return what it printed after "ready"."""
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    return output


def dead_pid():
    """The process id of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


@pytest.fixture
def created(dbpath):
    """The path of an existing, closed database."""
    semidbm.open(dbpath, "c").close()
    return dbpath


@pytest.mark.slow
@pytest.mark.parametrize("how", ["writer_active", "stats"])
def test_probes_never_get_a_writer_refused(created, how):
    probers = [start(PROBER, created, how)[0] for _ in range(2)]
    try:
        refusals = []
        for _ in range(OPENS):
            try:
                semidbm.open(created, "w").close()
            except semidbm.error as exc:
                refusals.append(str(exc))
    finally:
        counts = [finish(prober).split() for prober in probers]
    assert refusals == [], "%d of %d opens refused, first: %s" % (len(refusals), OPENS, refusals[0])
    for probes, active in counts:
        assert int(active) > 0, "the probes never overlapped a writer (%s probes)" % probes


def test_a_writer_that_holds_the_database_is_refused_within_the_bound_and_named(created):
    writer, line = start(WRITER, created)
    named = "locked by another writer \\(process %s\\): " % line.split()[1]
    try:
        started = time.monotonic()
        with pytest.raises(semidbm.error, match=named):
            semidbm.open(created, "w")
        elapsed = time.monotonic() - started
    finally:
        finish(writer)
    # At least the bound (less the clock's resolution on Windows), and no long wait.
    assert _lock.RETRY_SECONDS - 0.02 <= elapsed < _lock.RETRY_SECONDS + 1.0, elapsed


def test_a_closed_writer_leaves_no_process_id(created):
    with semidbm.open(created, "w"):
        assert (created / LOCK_NAME).read_bytes() == b"%d\n" % os.getpid()
    assert (created / LOCK_NAME).read_bytes() == b""
    writer, line = start(WRITER, created)
    assert (created / LOCK_NAME).read_bytes() == b"%s\n" % line.split()[1].encode()
    finish(writer)
    assert (created / LOCK_NAME).read_bytes() == b""


@pytest.mark.parametrize(
    "content",
    ["", "dead", "this process", "0", "99999999999999999999", "not a pid"],
)
def test_a_refusal_names_no_process_that_is_dead_absent_or_not_the_holder(created, content):
    content = {"dead": str(dead_pid()), "this process": str(os.getpid())}.get(content, content)
    holder, _ = start(HOLDER, created, content)
    try:
        with pytest.raises(semidbm.error, match="locked by another writer: ") as refusal:
            semidbm.open(created, "w")
    finally:
        finish(holder)
    assert "(process" not in str(refusal.value)
    semidbm.open(created, "w").close()


@posix_only
@pytest.mark.parametrize("how", ["database", "lock"])
def test_a_forked_child_keeps_the_parents_process_id_and_lock(created, how):
    parent, line = start(FORKER, created, how)
    pid = line.split()[1]
    named = "locked by another writer \\(process %s\\): " % pid
    try:
        assert (created / LOCK_NAME).read_bytes() == b"%s\n" % pid.encode()
        assert _lock.writer_active(str(created))
        with pytest.raises(semidbm.error, match=named):
            semidbm.open(created, "w")
    finally:
        finish(parent)
    assert (created / LOCK_NAME).read_bytes() == b""
    assert not _lock.writer_active(str(created))
