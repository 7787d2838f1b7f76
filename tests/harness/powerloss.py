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

A workload is a function ``run(path, journal, kernel)`` plus the tree it
starts from (``Workload``); ``WORKLOADS`` lists the short ones. A new
file format feature adds its workload there; its own files are checked
by ``Workload.check``, which sees every tree (see the persistent index
entry in ``WORKLOADS``).
"""

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
import warnings

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import semidbm
from semidbm import _kernel, db
from semidbm._settings import DEFAULT_BUFFER_SIZE
from tests.harness import powerfs, powermodel
from tests.harness.crash import value_of

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
#: generic POSIX. semidbm does not survive all of these today (docs/POWERLOSS.md).
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


# --- the workload's side ---


class Journal:
    """What a workload does to the database, noted in the trace as it goes.

    Each operation is logged before it is made (``op N``); after a
    ``sync()``, ``close()`` or ``compact()`` returns, ``durable N`` says
    the first N operations must survive; ``exists`` says an open with
    ``'c'`` or ``'n'`` has returned, so the database must open from then
    on. An operation is ``(key, value)``, ``(key, None)`` a delete, and
    ``(None, None)`` the emptying that opening with ``'n'`` is.
    """

    def __init__(self, marks_path, start=None):
        self._fd = os.open(marks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
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

    def open(self, kernel, path, flag, **options):
        """Open the database as a writer; for ``'n'``, log the emptying first."""
        if flag == "n":
            self.operations.append((None, None))
            self.note("op %d" % (len(self.operations) - 1))
        database = db.open_with(kernel, path, flag, **options)
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

    def compact(self, database):
        database.compact()
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
        if key is None:
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


def describe_mismatch(start, operations, recovered, low, high):
    """How ``recovered`` differs from the closest state it may be: for failure reports.

    Values never written to their key are named first, with where they
    differ from the nearest value that was (a run of zeros is what a page
    the disk did not write reads as).
    """
    written = {}
    for key, value in list(start.items()) + operations[:high]:
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


# --- workloads ---


class Workload:
    """A workload: ``run(path, journal, kernel)`` and the tree it starts from.

    ``initial(kernel)`` returns ``(tree, contents)``: the file system's
    tree at the start (all durable) and the database's contents in it.
    ``check(tree, expectation)``, if given, judges the tree further (a
    feature's own files) and returns a list of problems.
    """

    def __init__(self, name, run, initial=None, check=None):
        self.name = name
        self.run = run
        self.initial = initial or (lambda kernel: ({}, {}))
        self.check = check


def _existing(contents, buffer_size=DEFAULT_BUFFER_SIZE, tail=b""):
    """An ``initial`` that makes a database of ``contents`` (then ``tail`` bytes appended)."""

    def initial(kernel):
        place = tempfile.mkdtemp(prefix="powerloss-initial-")
        try:
            path = os.path.join(place, DB_NAME)
            with db.open_with(kernel, path, "c", buffer_size=buffer_size) as database:
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


_SOME = {b"k%d" % i: value_of(1000 + i, 10 * i) for i in range(6)}
_SOME[b""] = b""  # an empty key with an empty value: its record is twelve zero bytes


def _create(path, journal, kernel):
    """Create with ``'c'``, with the records of an empty key and value; sync; close."""
    database = journal.open(kernel, path, "c")
    journal.put(database, b"a", journal.value(20))
    journal.put(database, b"", b"")
    journal.put(database, b"b", journal.value(3000))
    journal.sync(database)
    journal.put(database, b"a", journal.value(5))
    journal.delete(database, b"b")
    journal.put(database, b"c", b"")
    journal.close(database)


def _unbuffered(path, journal, kernel):
    """Every write reaches the file at once (``buffer_size=0``); syncs here and there."""
    database = journal.open(kernel, path, "c", buffer_size=0)
    for i in range(8):
        journal.put(database, b"k%d" % (i % 5), journal.value(i * 700))
        if i in (2, 5):
            journal.sync(database)
        if i == 6:
            journal.delete(database, b"k1")
    journal.close(database)


def _recreate(path, journal, kernel):
    """Open with ``'n'`` over a database with contents: it is emptied; then write."""
    database = journal.open(kernel, path, "n")
    journal.put(database, b"new", journal.value(50))
    journal.put(database, b"k1", journal.value(10))
    journal.close(database)


def _compact(path, journal, kernel):
    """Update and delete, ``compact()``, write more, ``close(compact=True)``."""
    database = journal.open(kernel, path, "w")
    journal.put(database, b"k1", journal.value(100))
    journal.delete(database, b"k2")
    journal.put(database, b"big", journal.value(9000))
    journal.compact(database)
    journal.put(database, b"k3", journal.value(30))
    journal.delete(database, b"k4")
    journal.close(database, compact=True)


def _large(path, journal, kernel):
    """A small buffer: records larger than it are written straight; values span pages."""
    database = journal.open(kernel, path, "c", buffer_size=256)
    journal.put(database, b"small", journal.value(40))
    journal.put(database, b"large", journal.value(10_000))
    journal.sync(database)
    journal.put(database, b"larger", journal.value(150_000))
    journal.put(database, b"small", journal.value(300))
    journal.put(database, b"large", journal.value(5000))
    journal.close(database)


def _reader(path, journal, kernel):
    """A reader's ``refresh()`` across syncs and a compaction while the writer goes on."""
    writer = journal.open(kernel, path, "w")
    reader = db.open_with(kernel, path, "r")
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


def _torn(path, journal, kernel):
    """Open a database that ends in a torn record: the writer cuts it off; then write."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", semidbm.TornTailWarning)
        database = journal.open(kernel, path, "w")
    journal.put(database, b"after", journal.value(70))
    journal.close(database)


#: A record cut short: key length 3, value length 100, "abc", and 20 bytes of the value.
_TORN_TAIL = b"\x00\x00\x00\x03\x00\x00\x00\x64abc" + b"v" * 20

#: The short workloads, checked at every cut point. The persistent index (a later issue)
#: adds its workload here: it writes through the index's own code, and its ``check``
#: judges the index file of each tree (it may be missing or stale, never wrong: an index
#: that disagrees with the log must not be used).
WORKLOADS = {
    workload.name: workload
    for workload in (
        Workload("create", _create),
        Workload("unbuffered", _unbuffered),
        Workload("recreate", _recreate, _existing(_SOME)),
        Workload("compact", _compact, _existing(_SOME)),
        Workload("large", _large),
        Workload("reader", _reader, _existing(_SOME)),
        Workload("torn", _torn, _existing(_SOME, tail=_TORN_TAIL)),
    )
}


def random_workload(seed, length):
    """A long random workload: ``length`` steps of writes, deletes, syncs, compactions,
    closes and reopens (with ``'w'`` and now and then ``'n'``), and a reader's refreshes."""

    def run(path, journal, kernel):
        rng = random.Random(seed)
        buffer_size = rng.choice([0, 100, 4096, DEFAULT_BUFFER_SIZE])
        keys = [b""] + [b"k%d" % i for i in range(30)]
        database = journal.open(kernel, path, "c", buffer_size=buffer_size)
        reader = None
        try:
            for _ in range(length):
                roll = rng.random()
                if roll < 0.55:
                    size = rng.choice([0, rng.randrange(1, 100), rng.randrange(100, 6000)])
                    if rng.random() < 0.03:
                        size = rng.randrange(10_000, 300_000)
                    journal.put(database, rng.choice(keys), journal.value(size))
                elif roll < 0.70:
                    present = database.keys()
                    if present:
                        journal.delete(database, rng.choice(sorted(present)))
                elif roll < 0.80:
                    journal.sync(database)
                elif roll < 0.84:
                    journal.compact(database)
                elif roll < 0.90:
                    journal.close(database, compact=rng.random() < 0.3)
                    flag = "n" if rng.random() < 0.2 else "w"
                    database = journal.open(kernel, path, flag, buffer_size=buffer_size)
                else:
                    journal.sync(database)
                    if reader is None:
                        reader = db.open_with(kernel, path, "r")
                    reader.refresh()
                    assert dict(reader.items()) == dict(database.items()), "reader differs"
            journal.close(database)
        finally:
            if reader is not None:
                reader.close()
            database.close()

    return Workload("random-%d" % seed, run)


def record(workload, kernel, place):
    """Run ``workload`` with ``kernel`` on a recording file system under ``place``.

    Returns ``(initial tree, trace, journal)``.
    """
    tree, contents = workload.initial(kernel)
    mount = powerfs.Mount(os.path.join(place, "mnt"), tree)
    with mount:
        journal = Journal(mount.marks_path, contents)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", semidbm.TornTailWarning)
                workload.run(os.path.join(mount.mountpoint, DB_NAME), journal, kernel)
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


def explore(workload, kernel, checker, rules, rng, samples=2, cuts=None, place=None):
    """Record ``workload`` on ``kernel``, then check the trees at its cut points.

    Every cut point, or ``cuts`` of them drawn at random; at each, one
    tree for each fixed rule and ``samples`` draws of each random one.
    Failures go to ``checker.failures``; returns the number of cut points.
    """
    own_place = place is None
    place = place or tempfile.mkdtemp(prefix="powerloss-")
    try:
        initial, trace, journal = record(workload, kernel, place)
    finally:
        if own_place:
            shutil.rmtree(place, ignore_errors=True)
    checker.count("trace operations", len(trace))
    points = [k for k in range(len(trace) + 1) if k == len(trace) or trace[k][0] != "mark"]
    if cuts is not None and cuts < len(points):
        points = sorted(rng.sample(points, cuts))
    chosen = set(points)
    disk = powermodel.Disk.from_tree(initial)
    expectation = Expectation(exists=DB_NAME in initial)
    for position in range(len(trace) + 1):
        if position in chosen:
            checker.count("cut points")
            _check_cut(workload, checker, disk, expectation, journal, rules, rng, samples,
                       trace[max(0, position - 3) : position])
        if position < len(trace):
            op = trace[position]
            disk.apply(op)
            if op[0] == "mark":
                expectation.note(op[1])
    return len(points)


def _check_cut(workload, checker, disk, expectation, journal, rules, rng, samples, recent):
    seen = set()
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
                problems += workload.check(tree, expectation)
            if problems:
                for problem in problems:
                    key = (kind(problem), "%s/%s" % (data, meta))
                    checker.kinds[key] = checker.kinds.get(key, 0) + 1
                checker.failures.append(_report(workload, disk, data, meta, tree, expectation,
                                                problems, recent))


def kind(problem):
    """A failure's kind, for counting: what went wrong, without keys, values and numbers."""
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
        workloads = list(WORKLOADS.values()) if options.short else []
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
