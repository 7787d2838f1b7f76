"""Power loss: workloads on a recording file system, and every state a power cut may leave, checked.

A killed process loses only what it had not handed to the kernel
(``tests/harness/crash.py``); a power cut also loses what the kernel had
not yet put on the disk, and the disk may have put some of it there in
its own order. So the promise that "what ``sync()`` or ``close()``
covered survives a power loss" holds only if semidbm fsyncs each file
and directory at the right moments; kill tests cannot see a missing
fsync. This harness can:

1. A workload (sets, deletes, ``sync()``, ``compact()``, ``close()``,
   creation with ``'c'`` and ``'n'``, a reader's ``refresh()``) runs on
   the FUSE file system of ``tests/harness/powerfs.py``, which records
   every operation that changes what a disk holds, and the workload's
   own notes (``Journal``): which operation comes next, which sync,
   close or compaction has returned, whether the database has been
   created.
2. Replaying the trace (``powermodel.Disk``), at each cut point (every
   boundary between two recorded operations, or a random sample of them)
   the harness builds the trees a power cut there may leave, by the
   rules of ``tests/harness/powermodel.py``: nothing unsynced survives,
   everything does, a prefix of it in order, a random subset of the
   directory operations, file data in any page order, or a file's new
   size without its data (zeros).
3. Each tree is written to a scratch directory and opened with both
   kernels, read-only and for writing (``Checker.observe``), then judged
   against the journal (``judge``): the database opens (a torn tail
   may warn), unless it was never created, and then ``'c'`` finishes the
   creation; its contents are the state after some prefix of the logged
   operations no shorter than the last sync, close or compaction that
   returned (so every value is one written to that key, nothing never
   written appears, and deleted keys do not come back); a writer opening
   it sees the same, and what it writes after the recovery is there at
   the next open.

Run ``python -m tests.harness.powerloss --help`` from the repository
root (as root: the file system mounts FUSE) for long runs;
``tests/test_power_loss.py`` runs the short workloads at every cut point
and a few random ones. docs/POWERLOSS.md has the commands and results.

A workload is a function ``run(journal)`` plus the tree it
starts from (``Workload``); ``WORKLOADS`` lists the short ones. A new
file format feature adds its workload there; its own files are checked
by ``Workload.check``, which sees every tree. The index file is
one: its workload ``index`` writes, replaces, uses and removes index
files, and every workload's trees have their index file judged
(``check_index``: missing, stale or right, never wrong).
"""

import argparse
import contextlib
import os
import random
import shutil
import struct
import sys
import tempfile
import time
import warnings

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import semidbm
from semidbm import _index_file, _kernel, _settings, db
from semidbm._settings import DEFAULT_BUFFER_SIZE
from semidbm.format import DATA_NAME, INDEX_NAME, INDEX_TEMP_NAME
from tests.harness import powerfs, powermodel
from tests.harness.crash import value_of
from tests.support import index_format

#: Where the database lives in the file system's root.
DB_NAME = "db"

#: Rules (data, directory operations) whose trees semidbm must survive, as a disk that
#: keeps its writes in order, and any file system that keeps fsync's promise, may leave them.
SAFE_RULES = (
    ("durable", "durable"),
    ("all", "all"),
    ("all", "subset"),
    ("durable", "subset"),
    ("prefix", "prefix"),
    ("prefix", "subset"),
)
#: Rules that also let a file's new size reach the disk before its data (zeros where the
#: data was not written), or let file pages reach it in any order: XFS, ext4 data=writeback,
#: generic POSIX. semidbm survives them but for one case no check of the bytes can find: a
#: lost run of whole records ending where a record starts (docs/POWERLOSS.md).
HAZARD_RULES = (
    ("zeros", "all"),
    ("zeros", "durable"),
    ("pages", "subset"),
    ("pages", "all"),
)
#: Rules whose trees are the same on every draw (no random choice in them).
_FIXED = {"durable", "all", "zeros"}

#: Messages with which opening a database that was never created may fail.
NOT_CREATED = ("no semidbm database", "not a semidbm database (no data file)")


def scratch_directory(prefix):
    """A new directory for the trees to check: in memory (``/dev/shm``) where there is one.

    Checking a tree opens it for writing, which fsyncs; on a memory file
    system that costs nothing, and thousands of trees are checked.
    """
    memory = "/dev/shm"
    place = memory if os.path.isdir(memory) and os.access(memory, os.W_OK) else None
    return tempfile.mkdtemp(prefix=prefix, dir=place)


def kernels(names=None):
    """The kernels to check with: {name: module}, both unless ``names`` says otherwise.

    The compiled one is left out only where it cannot be imported.
    """
    found = {}
    for name in names or ("python", "cython"):
        try:
            found[name] = _kernel.load(name)
        except ImportError:
            if names:
                raise
    return found


def is_compiled(kernel):
    """True for the compiled kernel: the only one that writes and reads index files."""
    return kernel.__name__ == _kernel.MODULES["cython"]


@contextlib.contextmanager
def index_tail(size=1):
    """While the block runs, the compiled kernel writes index files on a small database too.

    ``_settings.index_due`` reads ``INDEX_MIN_TAIL`` (4 MiB) at each
    call; lowered to ``size`` bytes, a workload of a few kilobytes gets
    an index file at its first sync, a new one at each sync that grew the log
    by a quarter of what the last covered, and at each close that grew it
    by a 64th (docs/FORMAT.md, "Writing an index file"). Not 0: a sync that
    wrote nothing would then rewrite the index file. Restored afterwards.
    """
    saved = _settings.INDEX_MIN_TAIL
    _settings.INDEX_MIN_TAIL = size
    try:
        yield
    finally:
        _settings.INDEX_MIN_TAIL = saved


# --- the workload's side ---


class Journal:
    """What a workload does to the database, noted in the trace as it goes.

    Each operation is logged before it is made (``op N``); after a
    ``sync()``, ``close()`` or ``compact()`` returns, ``durable N`` says
    the first N operations must survive; ``exists`` says an open with
    ``'c'`` or ``'n'`` has returned, so the database must open from then
    on. An operation is ``(key, value)``, ``(key, None)`` a delete,
    ``(None, None)`` the emptying that opening with ``'n'`` is, and
    ``(None, changes)`` a batch: a tuple of such ``(key, value)`` pairs,
    which happen together or not at all.
    """

    def __init__(self, marks_path, kernel, path, start=None):
        self._fd = os.open(marks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        #: The store the workload runs on (a kernel module; a peer's, in powerpeers).
        self.kernel = kernel
        #: Where the database is, on the recording file system.
        self.path = path
        #: The database's contents before the workload (its initial tree's).
        self.start = dict(start or {})
        self.operations = []
        self._seed = 0

    def note(self, text):
        """Write one mark into the trace."""
        os.write(self._fd, text.encode("utf-8"))

    def value(self, size):
        """A new value of ``size`` bytes, different from every value before it."""
        self._seed += 1
        return value_of(self._seed, size)

    def put(self, database, key, value):
        self.operations.append((key, value))
        self.note("op %d" % (len(self.operations) - 1))
        database[key] = value

    def delete(self, database, key):
        self.operations.append((key, None))
        self.note("op %d" % (len(self.operations) - 1))
        del database[key]

    def batch(self, database, changes):
        """Commit ``changes`` (``(key, value or None)`` pairs) as one batch: one operation."""
        self.operations.append((None, tuple(changes)))
        self.note("op %d" % (len(self.operations) - 1))
        with database.batch() as batch:
            for key, value in changes:
                if value is None:
                    del batch[key]
                else:
                    batch[key] = value

    def open(self, flag, **options):
        """Open the database as a writer; for ``'n'``, log the emptying first."""
        if flag == "n":
            self.operations.append((None, None))
            self.note("op %d" % (len(self.operations) - 1))
        database = db.open_with(self.kernel, self.path, flag, **options)
        if flag in "cn":
            self.note("exists")
        self.durable()
        return database

    def durable(self):
        """Everything logged so far must survive (a sync, close or compaction returned)."""
        self.note("durable %d" % len(self.operations))

    def sync(self, database):
        database.sync()
        self.durable()

    def compact(self, database, **options):
        database.compact(**options)
        self.durable()

    def close(self, database, compact=False):
        database.close(compact=compact)
        self.durable()

    def finish(self):
        os.close(self._fd)


def expected_state(start, operations):
    """The database after ``operations`` from ``start``."""
    state = dict(start)
    for key, value in operations:
        if key is None and value is not None:
            state = expected_state(state, value)  # a batch
        elif key is None:
            state.clear()
        elif value is None:
            state.pop(key, None)
        else:
            state[key] = value
    return state


def matching_prefixes(start, operations, recovered, low, high):
    """The prefix lengths p, ``low`` <= p <= ``high``, after which the database is ``recovered``."""
    state = expected_state(start, operations[:low])
    found = [low] if state == recovered else []
    for position in range(low, high):
        state = expected_state(state, operations[position : position + 1])
        if state == recovered:
            found.append(position + 1)
    return found


def _changes(operations):
    """The operations with each batch's changes in its place."""
    for key, value in operations:
        if key is None and value is not None:
            yield from value
        else:
            yield key, value


def describe_mismatch(start, operations, recovered, low, high):
    """How ``recovered`` differs from the closest state it may be: for failure reports.

    Values never written to their key are named first, with where they
    differ from the nearest value that was (a run of zeros is what a page
    the disk did not write reads as).
    """
    written = {}
    for key, value in list(start.items()) + list(_changes(operations[:high])):
        if key is not None and value is not None:
            written.setdefault(key, []).append(value)
    notes = []
    for key in sorted(recovered):
        if recovered[key] not in written.get(key, ()):
            notes.append("%r holds a value never written to it (%s)"
                         % (key, _unlike(recovered[key], written.get(key, []))))
    best, best_differences = None, None
    state = expected_state(start, operations[:low])
    for position in range(low, high + 1):
        if position > low:
            state = expected_state(state, operations[position - 1 : position])
        differences = sorted(k for k in state.keys() | recovered.keys()
                             if state.get(k) != recovered.get(k))
        if best is None or len(differences) < len(best_differences):
            best, best_differences = position, differences
            closest = dict(state)
    for key in best_differences:
        if key in recovered and recovered[key] not in written.get(key, ()):
            continue  # already named
        if key not in recovered:
            notes.append("%r is missing" % (key,))
        elif key not in closest:
            notes.append("%r is there" % (key,))
        elif recovered[key] in written.get(key, ()):
            notes.append("%r holds another value" % (key,))
    return "contents match no state after %d..%d of %d operations; closest, after %d: %s" % (
        low, high, len(operations), best, "; ".join(notes[:4]))


def _unlike(value, candidates):
    """Where ``value`` first differs from the written value of its length, if there is one."""
    same = [candidate for candidate in candidates if len(candidate) == len(value)]
    if not same:
        return "%d bytes, no value of that length was written" % len(value)
    candidate = same[-1]
    differing = [i for i in range(len(value)) if value[i] != candidate[i]]
    zeros = all(value[i] == 0 for i in differing)
    return "%d bytes, differing from a written one in %d bytes from %d to %d%s" % (
        len(value), len(differing), differing[0], differing[-1],
        ", all of them zeros" if zeros else "")


# --- the index file of a tree ---

#: Every problem ``check_index`` finds starts so, then names its kind (below), then details.
INDEX_PROBLEM = "index: "
#: An index an open would use, and that is not right for the log it covers.
INDEX_WRONG = "a trusted index is wrong"
#: An index an open would not use, and that is not right either (harmless, but not promised).
INDEX_INVALID = "an index not valid for the data file beside it (not trusted, so not used)"
#: A right index that an open would not use.
INDEX_REFUSED = "a valid index is not trusted"


class _OneFile:
    """Stands in for ``_files.Directory`` in ``_index_file.load``: its only file is ``fd``'s."""

    def __init__(self, fd):
        self._fd = fd

    def open(self, name, flags):
        """A descriptor of the file, whatever ``name`` (``index``): the caller closes it."""
        return os.dup(self._fd)


def _anonymous(content):
    """A file holding ``content``, open unbuffered, gone once closed: in memory on Linux."""
    if hasattr(os, "memfd_create"):
        stream = open(os.memfd_create("powerloss-check"), "w+b", buffering=0)
    else:
        stream = tempfile.TemporaryFile(buffering=0)
    stream.write(content)
    return stream


def index_trusted(index, data):
    """What an open beside the data file ``data`` would trust of ``index``: its Header, or None.

    The decision is semidbm's own (``_index_file.load``: checks 1 and 2 of
    docs/FORMAT.md, "Trusting an index file", on the header and 32 samples of
    the data file), made on copies of the two files.
    """
    with _anonymous(index) as index_file, _anonymous(data) as data_file:
        found = _index_file.load(_OneFile(index_file.fileno()), data_file.fileno(), len(data))
    if found is None:
        return None
    os.close(found[0])
    return found[1]


def index_problems(index, data):
    """What ``index`` breaks of docs/FORMAT.md for the data file ``data`` (an empty list: valid).

    ``tests/support/index_format.py`` reads both files from the document alone:
    layout, every checksum, the samples, and that the slots are exactly
    the live keys of the log up to ``covered``, each at its last put.
    """
    try:
        return index_format.problems(index, data)
    except (ValueError, IndexError, struct.error) as exc:  # a log it cannot even parse
        return ["unreadable against the data file: %s" % exc]


def check_index(tree, expectation, count):
    """The index file of a tree a power cut may leave: missing, stale or right, never wrong.

    semidbm installs an index file only whole (``index.new`` fsynced, then
    renamed), only once the log it covers is on the disk, and removes it
    (the removal fsynced) before anything replaces that log (a
    compaction, ``'n'``); the log is only ever appended to. So in every
    tree the model builds, under any rule, an ``index`` is a valid index file
    of the data file beside it, for the log up to its ``covered``:
    ``index_problems`` finds nothing. Judged with semidbm's own trust
    decision (``index_trusted``):

    - trusted but not valid: wrong. An open maps its slots; the compiled
      kernel then reads otherwise than the pure one (which ``judge``
      compares) only where a wrong slot passes the checks 3 and 4 made at
      use (a slot at an older put of its key), while a damaged block of
      slots or a slot at another key's record is dropped. This check sees
      every wrong index file, whether semidbm would notice it later or not;
    - not trusted and not valid: harmless (the log is replayed whole), but
      the write protocol promises better: the old index file or the new one,
      whole, and never one beside a log it does not describe;
    - valid but not trusted: the trust check refuses a right index.

    Counts every tree checked by what its index file is. ``expectation`` is
    not needed: an index file answers for the data file beside it, whatever
    the journal says.
    """
    files = tree.get(DB_NAME)
    files = files if isinstance(files, dict) else {}
    if INDEX_TEMP_NAME in files:
        count("index.new left over")
    index = files.get(INDEX_NAME)
    if not isinstance(index, bytes):
        count("no index")
        return []
    data = files.get(DATA_NAME, b"")
    header = index_trusted(index, data)
    problems = index_problems(index, data)
    if header is None:
        count("index not trusted")
        if not problems:
            return [INDEX_PROBLEM + INDEX_REFUSED]
        return [INDEX_PROBLEM + INDEX_INVALID + ": " + "; ".join(problems[:3])]
    if problems:
        count("index trusted but wrong")
        return [INDEX_PROBLEM + INDEX_WRONG + ": " + "; ".join(problems[:3])]
    count("index trusted")
    if header.covered < len(data):
        count("index trusted and stale")  # the log goes on past it
    return []


# --- workloads ---


class Workload:
    """A workload: ``run(journal)`` and the tree it starts from.

    The journal (``Journal``) knows the store (``journal.kernel``) and the
    database's path (``journal.path``); ``journal.open(flag, **options)``
    opens it as a writer. The workloads of ``SHARED`` use only the
    journal's operations, so ``tests/harness/powerpeers.py`` runs them on
    other stores through a journal of its own.

    ``initial(kernel)`` returns ``(tree, contents)``: the file system's
    tree at the start (all durable) and the database's contents in it.
    ``check(tree, expectation, count)`` judges each tree further (a
    feature's own files): it returns a list of problems and counts what
    it saw with ``count(name)``. By default ``check_index``: the
    compiled kernel writes an index file at every compaction, so any
    workload's trees may hold one.
    """

    def __init__(self, name, run, initial=None, check=None):
        self.name = name
        self.run = run
        self.initial = initial or (lambda kernel: ({}, {}))
        self.check = check or check_index


def _existing(contents, buffer_size=DEFAULT_BUFFER_SIZE, tail=b"", indexed=False):
    """An ``initial`` that makes a database of ``contents`` (then ``tail`` bytes appended).

    ``indexed``: the compiled kernel makes it, whatever the writer's
    kernel, and leaves an index file of it (``index_tail``).
    """

    def initial(kernel):
        place = tempfile.mkdtemp(prefix="powerloss-initial-")
        maker = _kernel.load("cython") if indexed else kernel
        try:
            path = os.path.join(place, DB_NAME)
            with index_tail() if indexed else contextlib.nullcontext(), db.open_with(
                    maker, path, "c", buffer_size=buffer_size) as database:
                for key, value in contents.items():
                    database[key] = value
                database[b"gone"] = b"deleted before the start"
                del database[b"gone"]
            if tail:
                with open(os.path.join(path, "data"), "ab") as stream:
                    stream.write(tail)
            return {DB_NAME: powermodel.read_tree(path)}, dict(contents)
        finally:
            shutil.rmtree(place)

    return initial


#: The contents the workloads that start from a database start from.
SOME = {b"k%d" % i: value_of(1000 + i, 10 * i) for i in range(6)}
SOME[b""] = b""  # an empty key with an empty value: its record is twelve zero bytes


def _create(journal):
    """Create with ``'c'``, with the records of an empty key and value; sync; close."""
    database = journal.open("c")
    journal.put(database, b"a", journal.value(20))
    journal.put(database, b"", b"")
    journal.put(database, b"b", journal.value(3000))
    journal.sync(database)
    journal.put(database, b"a", journal.value(5))
    journal.delete(database, b"b")
    journal.put(database, b"c", b"")
    journal.close(database)


def _unbuffered(journal):
    """Every write reaches the file at once (``buffer_size=0``); syncs here and there."""
    database = journal.open("c", buffer_size=0)
    for i in range(8):
        journal.put(database, b"k%d" % (i % 5), journal.value(i * 700))
        if i in (2, 5):
            journal.sync(database)
        if i == 6:
            journal.delete(database, b"k1")
    journal.close(database)


def _recreate(journal):
    """Open with ``'n'`` over a database with contents: it is emptied; then write."""
    database = journal.open("n")
    journal.put(database, b"new", journal.value(50))
    journal.put(database, b"k1", journal.value(10))
    journal.close(database)


def _compact(journal):
    """Update and delete, ``compact()``, write more, ``close(compact=True)``."""
    database = journal.open("w")
    journal.put(database, b"k1", journal.value(100))
    journal.delete(database, b"k2")
    journal.put(database, b"big", journal.value(9000))
    journal.compact(database)
    journal.put(database, b"k3", journal.value(30))
    journal.delete(database, b"k4")
    journal.close(database, compact=True)


def _large(journal):
    """A small buffer: records larger than it are written straight; values span pages."""
    database = journal.open("c", buffer_size=256)
    journal.put(database, b"small", journal.value(40))
    journal.put(database, b"large", journal.value(10_000))
    journal.sync(database)
    journal.put(database, b"larger", journal.value(150_000))
    journal.put(database, b"small", journal.value(300))
    journal.put(database, b"large", journal.value(5000))
    journal.close(database)


def _reader(journal):
    """A reader's ``refresh()`` across syncs and a compaction while the writer goes on."""
    writer = journal.open("w")
    reader = db.open_with(journal.kernel, journal.path, "r")
    try:
        journal.put(writer, b"k1", journal.value(64))
        journal.sync(writer)
        reader.refresh()
        assert reader[b"k1"] == writer[b"k1"], "the reader missed a synced write"
        journal.delete(writer, b"k2")
        journal.compact(writer)
        reader.refresh()
        assert dict(reader.items()) == dict(writer.items()), "the reader missed the compaction"
        journal.put(writer, b"k5", journal.value(5000))
        journal.close(writer)
        reader.refresh()
        assert reader[b"k5"] == journal.operations[-1][1]
    finally:
        reader.close()
        writer.close()


def _torn(journal):
    """Open a database that ends in a torn record: the writer cuts it off; then write."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", semidbm.TornTailWarning)
        database = journal.open("w")
    journal.put(database, b"after", journal.value(70))
    journal.close(database)


def _batches(journal):
    """Format 2's batches: in the buffer and larger than it (written straight, over pages).

    With deletes, the empty key and value as a batch's last record (its
    twelve zero bytes end the batch), syncs and a compaction between.
    """
    database = journal.open("c", format=2, buffer_size=4096)
    journal.put(database, b"a", journal.value(30))
    journal.batch(database, [(b"a", journal.value(10)), (b"b", journal.value(2000)), (b"", b"")])
    journal.sync(database)
    journal.batch(database, [(b"c", journal.value(9000)), (b"a", None), (b"d", journal.value(5))])
    journal.batch(database, [(b"b", None), (b"e", journal.value(100))])
    journal.sync(database)
    journal.batch(database, [(b"", None), (b"f", journal.value(7000)), (b"", b"")])
    journal.compact(database)
    journal.batch(database, [(b"c", journal.value(50)), (b"g", journal.value(6000))])
    journal.close(database)


def _upgrade(journal):
    """A database of format 1.1 compacted into format 2.0, then a batch."""
    database = journal.open("w")
    journal.put(database, b"k1", journal.value(40))
    journal.compact(database, format=2)
    journal.batch(database, [(b"k2", None), (b"k3", journal.value(5000)), (b"new", b"")])
    journal.close(database)


def _index_start(kernel):
    """The ``index`` workload's initial tree: nothing, or for the pure kernel an indexed database.

    The compiled kernel creates the database and writes every index file
    itself. The pure kernel never writes one, so it starts from a
    database with an index file the compiled kernel wrote: its writes leave
    that index stale (the compiled kernel, reading the trees, replays the
    log past it), and its compaction must remove it before the log is
    replaced. Without the compiled kernel, from nothing.
    """
    if is_compiled(kernel) or "cython" not in kernels():
        return {}, {}
    return _INDEXED(kernel)


def _has_index(path):
    """True if the database at ``path`` has an index file now."""
    return os.path.exists(os.path.join(path, INDEX_NAME))


def _under_index_tail(run):
    """The workload ``run`` with ``INDEX_MIN_TAIL`` lowered while it runs (``index_tail``)."""

    def run_under_index_tail(journal):
        with index_tail():
            run(journal)

    return run_under_index_tail


def _index_life(journal):
    """The index's life: written at syncs, replaced, opened through, switched to, removed.

    Run under ``index_tail`` (indexes on a small database). With the
    compiled kernel: the first sync writes an index file, the next one
    replaces it (``index.new``, fsync, rename, directory fsync); the
    reopen with ``'w'`` opens through it and updates and deletes keys it
    holds; a sync writes a third, to which a reader's ``refresh()``
    switches; a compaction removes the index file, rewrites the log and writes
    a new one, and so does ``close(compact=True)``; ``'n'`` removes it,
    and the close after writes the new database's first. With the pure
    kernel the same steps leave the initial index stale until the
    compaction removes it (``_index_start``). Asserts that each step did
    what it is there for, where the kernel shows it.
    """
    compiled = is_compiled(journal.kernel)
    database = journal.open("c")
    for number in range(6):
        journal.put(database, b"k%d" % number, journal.value(300 * number))
    journal.put(database, b"", journal.value(12))
    journal.sync(database)
    assert _has_index(journal.path) or not compiled, "no index after the first sync"
    journal.put(database, b"k1", journal.value(2000))
    journal.delete(database, b"k2")
    journal.delete(database, b"")
    journal.put(database, b"k6", journal.value(3000))
    journal.sync(database)
    journal.close(database)
    database = journal.open("w")
    assert database.index_covered > 0 or not compiled, "the reopen did not use the index"
    journal.put(database, b"k3", journal.value(40))
    journal.delete(database, b"k4")
    journal.put(database, b"", b"")
    reader = db.open_with(journal.kernel, journal.path, "r")
    try:
        covered = reader.index_covered
        journal.put(database, b"k7", journal.value(6000))
        journal.sync(database)
        reader.refresh()
        assert reader.index_covered > covered or not compiled, "no switch to the new index"
        assert dict(reader.items()) == dict(database.items()), "the reader missed a sync"
        journal.compact(database)
        assert _has_index(journal.path) or not compiled, "the compaction wrote no new index"
        journal.put(database, b"k8", journal.value(100))
        journal.delete(database, b"k5")
        journal.close(database, compact=True)
        reader.refresh()
        assert dict(reader.items()) == expected_state(journal.start, journal.operations)
    finally:
        reader.close()
    database = journal.open("n")
    journal.put(database, b"k1", journal.value(50))
    journal.close(database)


#: A record cut short: key length 3, value length 100, "abc", and 20 bytes of the value.
_TORN_TAIL = b"\x00\x00\x00\x03\x00\x00\x00\x64abc" + b"v" * 20
#: The database the pure kernel's ``index`` workload starts from, with an index file.
_INDEXED = _existing(SOME, indexed=True)

#: The short workloads, checked at every cut point. ``index`` is the index file's:
#: it writes index files through the compiled kernel's own code (``_index_file``); every
#: workload's ``check`` (``check_index``) judges the index file of each tree: missing,
#: stale or right, never wrong.
#: The short workloads that use only the journal's operations, with the contents they
#: start from (None: nothing): other stores run them too (tests/harness/powerpeers.py).
SHARED = {
    "create": (_create, None),
    "unbuffered": (_unbuffered, None),
    "recreate": (_recreate, SOME),
    "compact": (_compact, SOME),
    "large": (_large, None),
}

WORKLOADS = {
    name: Workload(name, steps, contents and _existing(contents))
    for name, (steps, contents) in SHARED.items()
}
WORKLOADS.update(
    (workload.name, workload)
    for workload in (
        Workload("reader", _reader, _existing(SOME)),
        Workload("batches", _batches),
        Workload("upgrade", _upgrade, _existing(SOME)),
        Workload("torn", _torn, _existing(SOME, tail=_TORN_TAIL)),
        Workload("index", _under_index_tail(_index_life), _index_start),
    )
)


#: The keys of the random workloads: the empty one and 30 others.
RANDOM_KEYS = [b""] + [b"k%d" % i for i in range(30)]


def random_steps(rng, length):
    """The steps of a random workload, drawn with ``rng``, as tuples.

    ``("put", key, value size)``; ``("delete",)``: the caller then draws
    one of the keys present with the same ``rng``; ``("sync",)``;
    ``("compact",)``; ``("reopen", compact, flag)``: close (compacting or
    not) and open with ``'w'`` or ``'n'``; ``("refresh",)``: sync, and a
    reader refreshes. ``tests/harness/powerpeers.py`` draws the same
    steps for the other stores.
    """
    for _ in range(length):
        roll = rng.random()
        if roll < 0.55:
            size = rng.choice([0, rng.randrange(1, 100), rng.randrange(100, 6000)])
            if rng.random() < 0.03:
                size = rng.randrange(10_000, 300_000)
            yield "put", rng.choice(RANDOM_KEYS), size
        elif roll < 0.70:
            yield ("delete",)
        elif roll < 0.80:
            yield ("sync",)
        elif roll < 0.84:
            yield ("compact",)
        elif roll < 0.90:
            compact = rng.random() < 0.3
            yield "reopen", compact, "n" if rng.random() < 0.2 else "w"
        else:
            yield ("refresh",)


def random_workload(seed, length):
    """A long random workload: ``length`` steps of writes, deletes, syncs, compactions,
    closes and reopens (with ``'w'`` and now and then ``'n'``), and a reader's refreshes.

    An even ``seed`` runs under ``index_tail``: the compiled kernel then
    writes index files at syncs and closes too, not only at compactions,
    and its reader switches to them (the same steps as the odd seed's
    would be, the trace longer by the index file writes).
    """

    def run(journal):
        rng = random.Random(seed)
        buffer_size = rng.choice([0, 100, 4096, DEFAULT_BUFFER_SIZE])
        database = journal.open("c", buffer_size=buffer_size)
        reader = None
        try:
            for step in random_steps(rng, length):
                if write_step(journal, database, step, rng):
                    continue
                if step[0] == "sync":
                    journal.sync(database)
                elif step[0] == "reopen":
                    journal.close(database, compact=step[1])
                    database = journal.open(step[2], buffer_size=buffer_size)
                else:  # refresh
                    journal.sync(database)
                    if reader is None:
                        reader = db.open_with(journal.kernel, journal.path, "r")
                    reader.refresh()
                    assert dict(reader.items()) == dict(database.items()), "reader differs"
            journal.close(database)
        finally:
            if reader is not None:
                reader.close()
            database.close()

    if seed % 2:
        return Workload("random-%d" % seed, run)
    return Workload("random-%d-indexed" % seed, _under_index_tail(run))


def two_writers_workload(seed, length):
    """Two shared writers (flag ``'cm'``) of one database taking turns at random steps.

    Both live in this process, each with its own lock files open, so
    each turn of one catches up with what the other appended, compacted
    or left: the files see what two processes would do. Each step runs
    in one turn of the writer it picks (``Database.locked``), its note
    included, so the journal's order is the lock's. A ``sync()``,
    ``compact()`` or ``close()`` of either makes every operation noted
    before it durable: its fsync covers the whole file, whoever wrote
    it. Only those are promised (the safe rules: ``durable N``).
    """

    def run(journal):
        rng = random.Random(seed)
        writers = [open_shared(journal, rng), open_shared(journal, rng)]
        try:
            for step in random_steps(rng, length):
                number = rng.randrange(2)
                if step[0] == "reopen":
                    journal.close(writers[number], compact=step[1])
                    writers[number] = open_shared(journal, rng)
                    continue
                with writers[number].locked():
                    shared_step(journal, writers[number], step, rng)
            for database in writers:
                journal.close(database)
        finally:
            for database in writers:
                database.close()

    return Workload("two-writers-%d" % seed, run)


def open_shared(journal, rng):
    """Open a shared writer with a random write buffer; the database exists once it returns."""
    database = db.open_with(journal.kernel, journal.path, "cm",
                            buffer_size=rng.choice([0, 100, 4096, DEFAULT_BUFFER_SIZE]))
    journal.note("exists")
    journal.durable()
    return database


def write_step(journal, database, step, rng):
    """Make ``step`` of ``random_steps`` if it is a put, a delete or a compaction; else False.

    A delete deletes a key ``rng`` picks among those present, if any.
    """
    if step[0] == "put":
        journal.put(database, step[1], journal.value(step[2]))
    elif step[0] == "delete":
        present = database.keys()
        if present:
            journal.delete(database, rng.choice(sorted(present)))
    elif step[0] == "compact":
        journal.compact(database)
    else:
        return False
    return True


def shared_step(journal, database, step, rng):
    """One step of ``random_steps`` but a reopen, made by a shared writer in its turn."""
    if not write_step(journal, database, step, rng):
        # A sync, or a refresh: a shared writer's refresh catches up, in a turn.
        database.refresh()
        journal.sync(database)


def record(workload, kernel, place):
    """Run ``workload`` with ``kernel`` on a recording file system under ``place``.

    Returns ``(initial tree, trace, journal)``.
    """
    tree, contents = workload.initial(kernel)
    mount = powerfs.Mount(os.path.join(place, "mnt"), tree)
    with mount:
        journal = Journal(mount.marks_path, kernel, os.path.join(mount.mountpoint, DB_NAME),
                          contents)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", semidbm.TornTailWarning)
                workload.run(journal)
        finally:
            journal.finish()
    return tree, mount.trace, journal


# --- checking the trees ---


class Expectation:
    """What the journal says at a cut point: operations logged, how many durable, created."""

    __slots__ = ("logged", "low", "exists")

    def __init__(self, exists):
        self.logged = 0
        self.low = 0
        self.exists = exists

    def note(self, text):
        word, _, number = text.partition(" ")
        if word == "op":
            self.logged = max(self.logged, int(number) + 1)
        elif word == "durable":
            self.low = max(self.low, int(number))
        elif word == "exists":
            self.exists = True


def _outcome(function, *args):
    """Call ``function(*args)``; return ("ok", result, warnings) or ("error", "Type: message",
    warnings)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = function(*args)
        except Exception as exc:  # noqa: BLE001 - what fails, and how, is the observation
            return ("error", "%s: %s" % (type(exc).__name__, exc), _warnings(caught))
    return ("ok", result, _warnings(caught))


def _warnings(caught):
    return tuple(sorted({w.category.__name__ for w in caught}))


def _summary(outcome):
    """An outcome in a line: the error, or how many keys and which warnings."""
    if outcome[0] == "error":
        return outcome[1]
    return "%d keys%s" % (len(outcome[1]), " (%s)" % ", ".join(outcome[2]) if outcome[2] else "")


def _read(kernel, path, flag):
    with db.open_with(kernel, path, flag) as database:
        return dict(database.items())


def _write_after(kernel, path):
    """Open for writing, write one key, close: what the next open must show."""
    with db.open_with(kernel, path, "w") as database:
        database[b"written after the cut"] = b"recovered"


class Checker:
    """Opens the trees a power cut may leave and judges them; counts what it saw.

    Each distinct tree is opened once (``observe``); its judgement
    depends on the expectation of the cut point, so it is judged at each.
    """

    def __init__(self, kernel_modules, scratch):
        self.kernels = kernel_modules
        self.scratch = scratch
        self._observations = {}
        self.counts = {}
        self.failures = []
        #: How many problems of each kind (``kind``) and rule the failures had.
        self.kinds = {}

    def count(self, name, number=1):
        self.counts[name] = self.counts.get(name, 0) + number

    def observe(self, tree):
        """Open the tree read-only and for writing with each kernel; what each gave."""
        digest = powermodel.tree_digest(tree)
        if digest in self._observations:
            return self._observations[digest]
        self.count("trees opened")
        base = os.path.join(self.scratch, "tree")
        shutil.rmtree(base, ignore_errors=True)
        powermodel.write_tree(tree, base)
        path = os.path.join(base, DB_NAME)
        observation = {}
        for name, kernel in self.kernels.items():
            observation["r", name] = _outcome(_read, kernel, path, "r")
        for name, kernel in self.kernels.items():
            copy = os.path.join(self.scratch, "copy")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(base, copy)
            copy_path = os.path.join(copy, DB_NAME)
            outcome = _outcome(_read, kernel, copy_path, "w")
            observation["w", name] = outcome
            if outcome[0] == "ok":
                observation["after", name] = _outcome(_write_after, kernel, copy_path)
                observation["reopen", name] = _outcome(_read, kernel, copy_path, "r")
            else:
                observation["c", name] = _outcome(_read, kernel, copy_path, "c")
        shutil.rmtree(base, ignore_errors=True)
        self._observations[digest] = observation
        return observation

    def judge(self, observation, expectation, start, operations):
        """The problems of one observation at a cut point with ``expectation`` (a list)."""
        problems = []
        readings = [observation["r", name] for name in self.kernels]
        if any(reading != readings[0] for reading in readings[1:]):
            problems.append("the kernels read it differently: %s" % "; ".join(
                "%s %s" % (name, _summary(observation["r", name])) for name in self.kernels))
        for name in self.kernels:
            problems += self._judge_kernel(name, observation, expectation, start, operations)
        return problems

    def _judge_kernel(self, name, observation, expectation, start, operations):
        read = observation["r", name]
        write = observation["w", name]
        problems = []
        if read[0] == "error" or write[0] == "error":
            failed = read if read[0] == "error" else write
            if expectation.exists:
                return ["%s: the database does not open after the cut: %s" % (name, failed[1])]
            if not any(reason in failed[1] for reason in NOT_CREATED):
                return ["%s: a database never created fails to open for an undocumented "
                        "reason: %s" % (name, failed[1])]
            self.count("cuts before the database existed")
            if read[0] == "ok":
                problems.append("%s: opens for reading but not for writing: %s"
                                % (name, _summary(write)))
            created = observation.get(("c", name))
            if created is not None and (created[0] != "ok" or created[1]):
                problems.append("%s: 'c' does not finish the creation: %s"
                                % (name, _summary(created)))
            return problems
        for outcome, flag in ((read, "r"), (write, "w")):
            odd = [w for w in outcome[2] if w != "TornTailWarning"]
            if odd:
                problems.append("%s: opening with %r warned %s" % (name, flag, odd))
        if "TornTailWarning" in read[2]:
            self.count("torn tails (%s)" % name)
        recovered = read[1]
        high = min(expectation.logged, len(operations))
        found = matching_prefixes(start, operations, recovered, expectation.low, high)
        if not found:
            problems.append("%s: %s" % (name, describe_mismatch(
                start, operations, recovered, expectation.low, high)))
        else:
            self.count("unsynced operations lost (allowed)", high - found[-1])
        if write[1] != recovered:
            problems.append("%s: a writer sees other contents than a reader" % name)
        after, reopen = observation["after", name], observation["reopen", name]
        wanted = dict(write[1])
        wanted[b"written after the cut"] = b"recovered"
        if after[0] != "ok" or reopen[0] != "ok" or reopen[1] != wanted or reopen[2]:
            problems.append("%s: a write after the recovery did not survive the reopen: %s, %s"
                            % (name, _summary(after), _summary(reopen)))
        return problems


def record_in(workload, writer, place=None):
    """``record``, in ``place`` or else in a scratch directory removed afterwards."""
    own_place = place is None
    place = place or tempfile.mkdtemp(prefix="powerloss-")
    try:
        return record(workload, writer, place)
    finally:
        if own_place:
            shutil.rmtree(place, ignore_errors=True)


def cut_points(initial, trace, rng, cuts=None):
    """The states of a recorded run at its cut points: ``(position, disk, expectation)``.

    Every boundary between two recorded operations that are not notes, or
    ``cuts`` of them drawn with ``rng``. ``disk`` is the model with the
    trace up to ``position`` applied, ``expectation`` what its notes say:
    both change after each step, so use them before the next.
    """
    points = [k for k in range(len(trace) + 1) if k == len(trace) or trace[k][0] != "mark"]
    if cuts is not None and cuts < len(points):
        points = sorted(rng.sample(points, cuts))
    chosen = set(points)
    disk = powermodel.Disk.from_tree(initial)
    expectation = Expectation(exists=DB_NAME in initial)
    for position in range(len(trace) + 1):
        if position in chosen:
            yield position, disk, expectation
        if position < len(trace):
            op = trace[position]
            disk.apply(op)
            if op[0] == "mark":
                expectation.note(op[1])


def explore(workload, kernel, checker, rules, rng, samples=2, cuts=None, place=None):
    """Record ``workload`` on ``kernel``, then check the trees at its cut points.

    Every cut point, or ``cuts`` of them drawn at random; at each, one
    tree for each fixed rule and ``samples`` draws of each random one.
    Failures go to ``checker.failures``; returns the number of cut points.
    """
    initial, trace, journal = record_in(workload, kernel, place)
    checker.count("trace operations", len(trace))
    points = 0
    for position, disk, expectation in cut_points(initial, trace, rng, cuts):
        points += 1
        checker.count("cut points")
        _check_cut(workload, checker, disk, expectation, journal, rules, rng, samples,
                   trace[max(0, position - 3) : position])
    return points


def _check_cut(workload, checker, disk, expectation, journal, rules, rng, samples, recent):
    """Check the trees of one cut point. What ``workload.check`` counts is counted per tree,
    and once more per cut point where some tree had it (``cut points with NAME``)."""
    seen = set()
    counted = set()

    def count(name):
        checker.count(name)
        counted.add(name)

    for data, meta in rules:
        for _ in range(1 if data in _FIXED and meta in _FIXED else samples):
            tree = disk.crash(data, meta, rng)
            digest = powermodel.tree_digest(tree)
            if digest in seen:
                continue
            seen.add(digest)
            checker.count("trees checked")
            observation = checker.observe(tree)
            problems = checker.judge(observation, expectation, journal.start, journal.operations)
            if workload.check is not None:
                problems += workload.check(tree, expectation, count)
            if problems:
                for problem in problems:
                    key = (kind(problem), "%s/%s" % (data, meta))
                    checker.kinds[key] = checker.kinds.get(key, 0) + 1
                checker.failures.append(_report(workload, disk, data, meta, tree, expectation,
                                                problems, recent))
    for name in counted:
        checker.count("cut points with " + name)


def kind(problem):
    """A failure's kind, for counting: what went wrong, without keys, values and numbers."""
    if problem.startswith(INDEX_PROBLEM):
        return ": ".join(problem.split(": ", 2)[:2])  # "index: " and the kind
    text = problem.split(": ", 1)[-1]
    if "does not open" in text:
        return "does not open: " + text.split("after the cut: ", 1)[-1].split(": '", 1)[0]
    note = text.split("closest, after ", 1)[-1].split(": ", 1)[-1].split("; ")[0]
    for marker, name in (
        ("b'' holds a value never written", "phantom empty key: zero bytes read as records"),
        ("b'' is there", "phantom empty key: zero bytes read as records"),
        ("b'' holds another value", "the empty key's value changed by zero bytes read as records"),
        ("all of them zeros", "a value with zeros where the disk wrote no data"),
        ("no value of that length", "a phantom key or value: bytes read out of record alignment"),
        ("never written", "a value never written, not zeros alone"),
        ("holds another value", "no prefix: a record lost inside the log, later ones kept"),
        ("is there", "no prefix: a record lost inside the log, later ones kept"),
        ("is missing", "a synced key is missing"),
    ):
        if marker in note:
            return name
    return note[:80]


def _report(workload, disk, data, meta, tree, expectation, problems, recent):
    shown = [op if op[0] != "write" else op[:3] + ("%d bytes" % len(op[3]),) for op in recent]
    return "\n".join(
        ["%s, cut after trace operation %d (rules: data %s, directories %s); "
         "%d operations logged, %d durable, database %s"
         % (workload.name, disk.time, data, meta, expectation.logged, expectation.low,
            "created" if expectation.exists else "not yet created")]
        + ["  " + problem for problem in problems]
        + ["  last operations: %s" % shown]
        + ["  tree:"] + ["    " + line for line in powermodel.describe_tree(tree)]
    )


# --- the command ---


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20, help="random workloads per kernel")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--length", type=int, default=200, help="steps of a random workload")
    parser.add_argument("--cuts", type=int, default=150,
                        help="cut points drawn per random workload (0: every one)")
    parser.add_argument("--samples", type=int, default=3, help="draws of each random rule")
    parser.add_argument("--rules", choices=["safe", "hazard", "all"], default="safe")
    parser.add_argument("--kernel", choices=["python", "cython"], action="append",
                        help="the writer's kernel (default both); trees are read with both")
    parser.add_argument("--short", action="store_true", help="also the short workloads")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), action="append",
                        help="this short workload (instead of all of them with --short)")
    parser.add_argument("--show", type=int, default=5, help="failures printed per workload")
    options = parser.parse_args(argv)
    reason = powerfs.unavailable()
    if reason:
        print("cannot run: " + reason)
        return 2
    rules = {"safe": SAFE_RULES, "hazard": HAZARD_RULES, "all": SAFE_RULES + HAZARD_RULES}[
        options.rules]
    modules = kernels()
    failed = False
    for writer in options.kernel or list(modules):
        short = options.workload or (list(WORKLOADS) if options.short else [])
        workloads = [WORKLOADS[name] for name in short]
        workloads += [random_workload(seed, options.length) for seed in range(
            options.first_seed, options.first_seed + options.seeds)]
        for workload in workloads:
            scratch = scratch_directory("powerloss-check-")
            checker = Checker(modules, scratch)
            started = time.perf_counter()
            rng = random.Random("%s %s" % (workload.name, writer))
            try:
                cuts = None if workload.name in WORKLOADS or not options.cuts else options.cuts
                explore(workload, modules[writer], checker, rules, rng, options.samples, cuts)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            print("%s, writer %s: %.1f s, %s" % (
                workload.name, writer, time.perf_counter() - started,
                ", ".join("%s %d" % item for item in sorted(checker.counts.items()))))
            for failure in checker.failures[: options.show]:
                print("FAILURE " + failure.replace("\n", "\n    "))
            if checker.failures:
                print("%d failures in all; problems by kind and rule:" % len(checker.failures))
                for (name, rule), number in sorted(checker.kinds.items()):
                    print("    %5d  %-14s %s" % (number, rule, name))
                failed = True
            sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
