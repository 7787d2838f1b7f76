"""Power cuts against dbm.gnu and LMDB: what the peers keep of semidbm's power-loss workloads.

What other stores lose where semidbm is checked (docs/POWERLOSS.md), at
their own defaults: what they lose is the result, nothing of theirs is
changed. So this runs semidbm's own short workloads
(``powerloss.SHARED``) and random steps (``powerloss.random_steps``),
through a journal that calls each peer's API (``PeerJournal``), on the
same recording file system
(``powerfs.Mount``, through ``powerloss.record``), rebuilds the trees a
power cut may leave with the same model and rules (``powermodel.Disk``,
``powerloss.SAFE_RULES`` and ``HAZARD_RULES``), and judges each tree by
the same rule (``powerloss.matching_prefixes``): it opens, and holds the
state after some prefix of the logged operations no shorter than the
last durable point.

The peers, at their documented defaults:

``gdbm``
    ``dbm.gnu.open(path, 'c')`` (or ``'n'``, ``'w'``), no ``'s'``: a
    store writes to the file's shared writable map, ``sync()`` is
    gdbm_sync (msync, fsync), ``close()`` syncs; the compaction is
    ``reorganize()``, followed by ``sync()`` (gdbm promises durability
    at gdbm_sync and gdbm_close only). The map's dirty pages reach the
    recording file system at writeback, which on this mount is at the
    msync, fsync or close that follows: the trace places them there.
``lmdb``
    ``lmdb.open(path)``: sync, metasync, no writemap, a 10 MiB map. Each
    commit of a write transaction is durable. Operations between two
    syncs of the workload go in one write transaction, committed at the
    sync (or the close); the unbuffered workload commits each operation
    on its own. ``'n'`` over an existing database empties it in one
    committed transaction (``drop(delete=False)`` of the main database),
    what a user keeping the environment would do. LMDB has no compaction
    in place (``copy(compact=True)`` writes another environment; freed
    pages are reused instead), so the compaction steps are left out.
    LMDB refuses an empty key, so its workloads write ``b'\\x00'`` in
    place of ``b''``.

Neither peer promises that opening makes a new database durable, so
``exists`` (the database must open from then on) is noted at the first
durable point after a creating open, not when it returns; before it, a
tree that does not open is allowed if the creating open, as a user
would retry it, works on it. The workloads ``reader`` and ``torn`` are
semidbm's own (a reader's ``refresh()``, semidbm's torn tail) and are
not run.

Each distinct tree is opened read-only and all its items read (gdbm
``'r'``, with ``len()`` checked against ``keys()``, which stops quietly
at an error; LMDB ``readonly=True, lock=False``: the lock file is
rebuilt by the first process, so it is no part of what survives); then,
on a copy, as a user would go on: opened as a writer, a key written,
closed, read again (``_look``). Both in a forked child, so that a crash
or a hang in the peer's code on a damaged file is a result, not the end
of the run. Failures are counted by rule and kind (``kind``), with one
example of each. Run ``python -m tests.harness.powerpeers --help`` from
the repository root, as root; docs/RELIABILITY.md has the results.
"""

import argparse
import importlib.util
import os
import pickle
import random
import re
import select
import shutil
import signal
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, _ROOT)
if importlib.util.find_spec("semidbm") is None:  # powerloss imports it: use the checkout's
    sys.path.insert(0, os.path.join(_ROOT, "src"))

from tests.harness import powerfs, powerloss, powermodel  # noqa: E402
from tests.harness.powerloss import DB_NAME  # noqa: E402

#: Seconds a child may take to open and read one tree.
READ_TIMEOUT = 60


class Unreadable(Exception):
    """The database opened, but reading or writing its items failed (the message says how)."""


def _error_text(exc, path):
    """How opening or reading failed, in a line, with the scratch path left out."""
    if isinstance(exc, Unreadable):
        return str(exc)
    return "it does not open: %s" % _exception(exc).replace(path, "{db}")


def _exception(exc):
    return "%s.%s: %s" % (type(exc).__module__, type(exc).__name__, exc)


def _items(pairs):
    """A dict of the ``(key, value)`` pairs from an iterator; its failure is ``Unreadable``."""
    try:
        return {bytes(key): bytes(value) for key, value in pairs}
    except Unreadable:
        raise
    except Exception as exc:
        raise Unreadable("it opens, but reading its items fails: " + _exception(exc)) from exc


# --- the peers ---


class Gdbm:
    """dbm.gnu at its defaults: one file, stores through a shared map, durable at sync()."""

    name = "gdbm"

    def unavailable(self):
        """Why this Python cannot run it (a sentence), or None."""
        if importlib.util.find_spec("_gdbm") is None:
            return ("dbm.gnu is not in this Python (Debian's python3-gdbm gives it to "
                    "/usr/bin/python3)")
        return None

    def version(self):
        import _gdbm

        return "GNU dbm %s" % ".".join(map(str, _gdbm._GDBM_VERSION))

    def key(self, key):
        """The key stored for a workload's ``key``."""
        return key

    def open(self, path, flag, unbuffered):
        """A writer (``flag`` ``'c'``, ``'n'`` or ``'w'``); gdbm has no buffer to turn off."""
        import dbm.gnu

        return _GdbmWriter(dbm.gnu.open(path, flag))

    def read(self, path):
        """The contents, opened read-only (``'r'``) as a reader after a reboot would."""
        import dbm.gnu

        database = dbm.gnu.open(path, "r")

        def pairs():
            # keys() stops quietly at an error (gdbm_firstkey and gdbm_nextkey return NULL
            # for it); gdbm_count, behind len(), raises it, or counts the records.
            count, keys = len(database), database.keys()
            if len(keys) != count:
                raise Unreadable("it opens, but keys() lists fewer records than len() counts")
            for key in keys:
                yield key, database[key]

        try:
            return _items(pairs())
        finally:
            database.close()

    def missing(self, tree):
        """True if the database's file is not in ``tree``."""
        return DB_NAME not in tree


class _GdbmWriter:
    """A gdbm database open for writing: nothing is durable before sync() or close()."""

    opened_durable = False

    def __init__(self, database):
        self.database = database

    def put(self, key, value):
        """Set ``key``; returns whether that was a durable point (for gdbm, never)."""
        self.database[key] = value
        return False

    def delete(self, key):
        del self.database[key]
        return False

    def sync(self):
        self.database.sync()

    def compact(self):
        """reorganize(), then sync(): gdbm promises nothing at reorganize() alone."""
        self.database.reorganize()
        self.database.sync()
        return True

    def close(self, compact=False):
        if compact:
            self.database.reorganize()
        self.database.close()

    def abandon(self):
        """Close after a failure, noting nothing."""
        self.database.close()


class Lmdb:
    """LMDB at its defaults (sync, metasync, no writemap): each committed transaction durable."""

    name = "lmdb"

    def unavailable(self):
        if importlib.util.find_spec("lmdb") is None:
            return "lmdb is not installed (pip install lmdb)"
        return None

    def version(self):
        import lmdb

        return "py-lmdb %s, LMDB %s" % (lmdb.__version__, ".".join(map(str, lmdb.version())))

    def key(self, key):
        return key or b"\x00"  # LMDB refuses an empty key (MDB_BAD_VALSIZE)

    def open(self, path, flag, unbuffered):
        """A writer: ``lmdb.open(path)``, emptied in a committed transaction for ``'n'``."""
        import lmdb

        return _LmdbWriter(lmdb.open(path), flag, unbuffered)

    def read(self, path):
        """The contents, opened read-only without the lock file (which the first process
        rebuilds: it is no part of what survives)."""
        import lmdb

        env = lmdb.open(path, readonly=True, lock=False, create=False)
        try:
            with env.begin() as txn:
                return _items(txn.cursor())
        finally:
            env.close()

    def missing(self, tree):
        """True if the environment's directory or data file is not in ``tree``."""
        return not isinstance(tree.get(DB_NAME), dict) or "data.mdb" not in tree[DB_NAME]


class _LmdbWriter:
    """An LMDB environment open for writing, with one write transaction open from one sync
    to the next, or none when ``unbuffered`` (each operation commits on its own)."""

    def __init__(self, env, flag, unbuffered):
        self.env = env
        self.opened_durable = flag == "n"
        if flag == "n":
            with env.begin(write=True) as txn:
                txn.drop(env.open_db(), delete=False)
        self.txn = None if unbuffered else env.begin(write=True)

    def _write(self, method, *args):
        if self.txn is not None:
            getattr(self.txn, method)(*args)
            return False
        with self.env.begin(write=True) as txn:
            getattr(txn, method)(*args)
        return True

    def put(self, key, value):
        return self._write("put", key, value)

    def delete(self, key):
        return self._write("delete", key)

    def sync(self):
        if self.txn is not None:
            self.txn.commit()
            self.txn = self.env.begin(write=True)

    def compact(self):
        """Left out: LMDB has no compaction in place (and reuses freed pages)."""
        return False

    def close(self, compact=False):
        if self.txn is not None:
            self.txn.commit()
            self.txn = None
        self.env.close()

    def abandon(self):
        if self.txn is not None:
            self.txn.abort()
        self.env.close()


PEERS = {peer.name: peer for peer in (Gdbm(), Lmdb())}


def _make(peer, path, contents):
    """An existing database at ``path`` holding ``contents``, with a key set and deleted."""
    writer = peer.open(path, "c", unbuffered=False)
    try:
        for key, value in contents.items():
            writer.put(peer.key(key), value)
        writer.put(b"gone", b"deleted before the start")
        writer.sync()
        writer.delete(b"gone")
    except BaseException:
        writer.abandon()
        raise
    writer.close()


# --- the workload's side ---


class PeerJournal:
    """``powerloss.Journal``'s notes, for a peer: the workloads call this, it calls the peer.

    Operations and notes go to the base journal, so the trace and the
    logged operations are those ``powerloss`` reads. ``durable N`` is
    noted after each sync, close and compaction that is a durable point
    for the peer, and after each operation that commits on its own;
    ``exists`` at the first durable point after a creating open.
    """

    def __init__(self, base, peer, path):
        self.base = base
        self.peer = peer
        self.path = path
        self.state = dict(base.start)
        self.writer = None
        self._creating = False

    def value(self, size):
        return self.base.value(size)

    def keys(self):
        """The keys the database holds now, sorted."""
        return sorted(self.state)

    def _log(self, key, value):
        self.base.operations.append((key, value))
        self.base.note("op %d" % (len(self.base.operations) - 1))
        if key is None:
            self.state.clear()
        elif value is None:
            self.state.pop(key, None)
        else:
            self.state[key] = value

    def durable(self):
        if self._creating:
            self.base.note("exists")
            self._creating = False
        self.base.durable()

    def open(self, flag, buffer_size=None):
        """Open as a writer; ``buffer_size=0`` (semidbm's writes straight to the file)
        is the peer's unbuffered mode, any other buffer size its default."""
        if flag == "n":
            self._log(None, None)
        self.writer = self.peer.open(self.path, flag, buffer_size == 0)
        self._creating = self._creating or flag in "cn"
        if self.writer.opened_durable:
            self.durable()
        return self.writer

    def put(self, writer, key, value):
        key = self.peer.key(key)
        self._log(key, value)
        if writer.put(key, value):
            self.durable()

    def delete(self, writer, key):
        key = self.peer.key(key)
        self._log(key, None)
        if writer.delete(key):
            self.durable()

    def sync(self, writer):
        writer.sync()
        self.durable()

    def compact(self, writer):
        if writer.compact():
            self.durable()

    def close(self, writer, compact=False):
        self.writer = None
        writer.close(compact)
        self.durable()


def workload(name, steps, contents=None):
    """A ``powerloss.Workload`` running ``steps(journal)`` on a peer (its "kernel").

    ``contents``: the database the file system starts with (made by the
    peer outside the file system), or None for none.
    """

    def run(base):
        journal = PeerJournal(base, base.kernel, base.path)
        try:
            steps(journal)
        finally:
            if journal.writer is not None:
                journal.writer.abandon()

    def initial(peer):
        if contents is None:
            return {}, {}
        place = tempfile.mkdtemp(prefix="powerpeers-initial-")
        try:
            _make(peer, os.path.join(place, DB_NAME), contents)
            stored = {peer.key(key): value for key, value in contents.items()}
            return powermodel.read_tree(place), stored
        finally:
            shutil.rmtree(place)

    return powerloss.Workload(name, run, initial)


#: The short workloads: ``powerloss.SHARED``, those of ``powerloss.WORKLOADS`` that use
#: only the journal (semidbm's own reader, torn tail and index are left out).
WORKLOADS = {
    name: workload(name, steps, contents)
    for name, (steps, contents) in powerloss.SHARED.items()
}


def random_workload(seed, length):
    """``powerloss.random_workload``'s steps for the same seed, drawn alike, on a peer.

    Its buffer size of 0 (one draw in four) is LMDB's commit per
    operation; its reader's refresh is only the sync before it (a gdbm
    writer locks readers out).
    """

    def steps(journal):
        rng = random.Random(seed)
        unbuffered = rng.choice([True, False, False, False])
        buffer_size = 0 if unbuffered else None
        database = journal.open("c", buffer_size)
        for step in powerloss.random_steps(rng, length):
            if step[0] == "put":
                journal.put(database, step[1], journal.value(step[2]))
            elif step[0] == "delete":
                present = journal.keys()
                if present:
                    journal.delete(database, rng.choice(present))
            elif step[0] == "compact":
                journal.compact(database)
            elif step[0] == "reopen":
                journal.close(database, compact=step[1])
                database = journal.open(step[2], buffer_size)
            else:  # a sync, or a sync and a reader's refresh
                journal.sync(database)
        journal.close(database)

    return workload("random-%d" % seed, steps)


# --- checking the trees ---


def _in_child(function, *args):
    """``function(*args)`` in a forked child: its result, or ("error", why) if it crashed
    or hung."""
    source, sink = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(source)
            data = pickle.dumps(function(*args))
            view = memoryview(data)
            while view:
                view = view[os.write(sink, view) :]
            code = 0
        finally:
            os._exit(code)
    os.close(sink)
    chunks = []
    deadline = time.monotonic() + READ_TIMEOUT
    try:
        while True:
            ready, _, _ = select.select([source], [], [], max(0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return ("error", "it hangs (killed after %d s)" % READ_TIMEOUT)
            chunk = os.read(source, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(source)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return ("error", "it crashes the reader: %s" % signal.Signals(os.WTERMSIG(status)).name)
    if os.WEXITSTATUS(status) != 0:
        return ("error", "the reading process failed (exit status %d)" % os.WEXITSTATUS(status))
    return pickle.loads(b"".join(chunks))


#: What the writer check writes after the cut.
AFTER = (b"written after the cut", b"recovered")


def _write_after(peer, path, flag):
    """Open as a writer (``flag``), write ``AFTER``, close; the contents read back."""
    writer = peer.open(path, flag, unbuffered=False)
    try:
        writer.put(*AFTER)
    except Exception as exc:
        writer.abandon()
        raise Unreadable("it opens for writing, but a write fails: %s" % _exception(exc)) \
            from exc
    writer.close()
    return peer.read(path)


def _look(peer, base):
    """In the child: the tree at ``base`` read read-only, and, on a copy, written after the
    cut as a user would go on: opened as a writer (``'w'``; ``'c'``, the creation retried,
    if the read failed), a key written, closed, and read again. Returns (read, written),
    each ("ok", contents) or ("error", how it failed)."""
    path = os.path.join(base, DB_NAME)
    read = _attempt(path, peer.read, path)
    shutil.copytree(base, base + "-copy")
    copy = os.path.join(base + "-copy", DB_NAME)
    written = _attempt(copy, _write_after, peer, copy, "w" if read[0] == "ok" else "c")
    return read, written


def _attempt(path, function, *args):
    """("ok", ``function(*args)``) or ("error", how it failed, ``path`` left out)."""
    try:
        return ("ok", function(*args))
    except Exception as exc:  # noqa: BLE001 - how it fails is the observation
        return ("error", _error_text(exc, path))


class Checker:
    """Opens the trees a power cut may leave with a peer, judges them, counts by rule and kind.

    ``counts``: totals ("cut points", "trees checked", ...); ``by_rule``:
    {rule: [trees checked, failing trees]}; ``kinds``: {(rule, kind):
    [failing trees, an example]}.
    """

    def __init__(self, peer, scratch):
        self.peer = peer
        self.scratch = scratch
        self.counts = {}
        self.by_rule = {}
        self.kinds = {}
        self._observations = {}
        self._values = {}

    def count(self, name, number=1):
        self.counts[name] = self.counts.get(name, 0) + number

    def observe(self, tree, digest):
        """(read, written) for ``tree`` (see ``_look``): opened once per distinct tree."""
        if digest not in self._observations:
            self.count("trees opened")
            base = os.path.join(self.scratch, "tree")
            for place in (base, base + "-copy"):
                shutil.rmtree(place, ignore_errors=True)
            powermodel.write_tree(tree, base)
            outcome = _in_child(_look, self.peer, base)
            if outcome[0] == "error":  # the child crashed or hung, reading or writing
                outcome = (outcome, outcome)
            read, written = (self._intern(item) for item in outcome)
            if read[0] == "error" and self.peer.missing(tree):
                read = ("error", "it is not in the tree (its name was never made durable)")
            self._observations[digest] = (read, written)
            for place in (base, base + "-copy"):
                shutil.rmtree(place, ignore_errors=True)
        return self._observations[digest]

    def _intern(self, outcome):
        """``outcome`` with each value replaced by the one equal value kept: thousands of
        trees hold the same values, and a small process forks faster."""
        if outcome[0] != "ok":
            return outcome
        return ("ok", {key: self._values.setdefault(value, value)
                       for key, value in outcome[1].items()})

    def judge(self, observation, expectation, start, operations):
        """The problems of one tree at a cut point (a list, empty if it passes)."""
        read, written = observation
        name = self.peer.name
        if read[0] == "error":
            if expectation.exists:
                return ["%s: the database is lost after the cut: %s" % (name, read[1])]
            self.count("cuts before the database existed")
            if written[0] == "error":
                return ["%s: the creating open fails on what the cut left: %s"
                        % (name, written[1])]
            recovered = {k: v for k, v in written[1].items() if k != AFTER[0]}
        elif written[0] == "error":
            return ["%s: the database is lost after the cut: %s; a reader sees %d keys"
                    % (name, written[1], len(read[1]))]
        else:
            recovered = read[1]
        problems = []
        if written[1] != {**recovered, AFTER[0]: AFTER[1]}:
            problems.append("%s: a key written after the cut is not there at the next open, or "
                            "a writer sees other contents than a reader" % name)
        high = min(expectation.logged, len(operations))
        found = powerloss.matching_prefixes(start, operations, recovered, expectation.low, high)
        if found:
            self.count("unsynced operations lost (allowed)", high - found[-1])
            return problems
        older = powerloss.matching_prefixes(start, operations, recovered, 0, expectation.low)
        if older:
            return problems + ["%s: rolled back: the contents are the state after %d "
                               "operations, %d were durable" % (name, older[-1], expectation.low)]
        return problems + ["%s: %s" % (name, powerloss.describe_mismatch(
            start, operations, recovered, expectation.low, high))]

    def check_cut(self, disk, expectation, journal, rules, rng, samples, where):
        """Build, open and judge the trees of each rule at this cut point."""
        self.count("cut points")
        for data, meta in rules:
            rule = "%s/%s" % (data, meta)
            tally = self.by_rule.setdefault(rule, [0, 0])
            seen = set()
            fixed = data in ("durable", "all", "zeros") and meta in ("durable", "all")
            for _ in range(1 if fixed else samples):
                tree = disk.crash(data, meta, rng)
                digest = powermodel.tree_digest(tree)
                if digest in seen:
                    continue
                seen.add(digest)
                tally[0] += 1
                self.count("trees checked")
                problems = self.judge(self.observe(tree, digest), expectation, journal.start,
                                      journal.operations)
                if not problems:
                    continue
                tally[1] += 1
                for name in sorted({kind(problem) for problem in problems}):
                    entry = self.kinds.setdefault((rule, name), [0, None])
                    entry[0] += 1
                    if entry[1] is None:
                        entry[1] = "%s (%s; %d operations logged, %d durable; tree: %s)" % (
                            problems[0], where, expectation.logged, expectation.low,
                            _files(tree) or "empty")


def kind(problem):
    """A problem's kind, for counting: what went wrong, without keys, values and numbers."""
    text = re.sub(r"b'[^']*'|b\"[^\"]*\"", "{bytes}", problem.split(": ", 1)[1])
    text = text.split("; a reader sees ")[0]
    if text.startswith("the database is lost after the cut: "):
        return "lost: " + text.split("after the cut: ", 1)[1]
    if text.startswith("the creating open fails"):
        return "not yet created, and the creating open fails: " + text.split(": ", 1)[1]
    if text.startswith("a key written after the cut"):
        return "a key written after the cut is lost, or a writer sees other contents"
    if text.startswith("rolled back"):
        return "rolled back: an older state, durable operations lost"
    note = text.split("closest, after ", 1)[-1].split(": ", 1)[-1].split("; ")[0]
    for marker, name in (
        ("all of them zeros", "a value with zeros in it, never written"),
        ("no value of that length", "a value of a length never written"),
        ("never written", "a value never written (not zeros alone)"),
        ("is missing", "a key missing that every allowed state holds"),
        ("is there", "a key there that no allowed state holds"),
        ("holds another value", "a key holding a value no allowed state gives it"),
    ):
        if marker in note:
            return "no allowed state: " + name
    return note[:80]


def explore(workload, peer, checker, rules, rng, samples=2, cuts=None, place=None):
    """Record ``workload`` on ``peer``, then check the trees at its cut points.

    Every cut point (every boundary between two recorded operations that
    are not notes), or ``cuts`` of them drawn at random; at each, one
    tree for each fixed rule and ``samples`` draws of each random one.
    Returns the number of cut points.
    """
    initial, trace, journal = powerloss.record_in(workload, peer, place)
    checker.count("trace operations", len(trace))
    points = 0
    for position, disk, expectation in powerloss.cut_points(initial, trace, rng, cuts):
        points += 1
        last = trace[position - 1] if position else ("start",)
        where = "%s, cut after trace operation %d of %d, %s" % (
            workload.name, position, len(trace), _short(last))
        checker.check_cut(disk, expectation, journal, rules, rng, samples, where)
    return points


def _files(tree, prefix=""):
    """The files of ``tree`` with their sizes, in a line ("db/data.mdb (8192 bytes)")."""
    parts = []
    for name in sorted(tree):
        if isinstance(tree[name], dict):
            parts.append(_files(tree[name], prefix + name + "/") or prefix + name + "/")
        else:
            parts.append("%s%s (%d bytes)" % (prefix, name, len(tree[name])))
    return ", ".join(parts)


def _short(op):
    """A trace operation in a few words (a write without its bytes)."""
    if op[0] == "write":
        return "write ino %d at %d, %d bytes" % (op[1], op[2], len(op[3]))
    return " ".join(str(part) for part in op)


# --- the command ---


def _print_rules(by_rule, kinds):
    """Trees and failing trees per rule, then failing trees per kind, with an example each."""
    for rule, (trees, failing) in by_rule.items():
        print("    %-15s trees %6d, failing %6d" % (rule, trees, failing))
    for (rule, name), (number, example) in sorted(kinds.items()):
        print("    %6d  %-15s %s" % (number, rule, name))
        print("            e.g. %s" % example)


def run_store(peer, workloads, rules, samples, cuts):
    """Explore each workload on ``peer``; print its counts, then the totals."""
    print("== %s (%s)" % (peer.name, peer.version()))
    started = time.perf_counter()
    counts, by_rule, kinds = {}, {}, {}
    for item in workloads:
        checker = Checker(peer, powerloss.scratch_directory("powerpeers-check-"))
        begun = time.perf_counter()
        try:
            explore(item, peer, checker, rules, random.Random("%s %s" % (item.name, peer.name)),
                    samples, cuts)
        finally:
            shutil.rmtree(checker.scratch, ignore_errors=True)
        print("%s, %s: %.1f s, %s" % (peer.name, item.name, time.perf_counter() - begun,
                                       ", ".join("%s %d" % c for c in sorted(
                                           checker.counts.items()))))
        _print_rules(checker.by_rule, checker.kinds)
        sys.stdout.flush()
        for name in ("trace operations", "cut points", "trees checked"):
            counts[name] = counts.get(name, 0) + checker.counts.get(name, 0)
        for rule, (trees, failing) in checker.by_rule.items():
            total = by_rule.setdefault(rule, [0, 0])
            total[0] += trees
            total[1] += failing
        for key, (number, example) in checker.kinds.items():
            kinds.setdefault(key, [0, example])[0] += number
    print("== %s, all %d workloads: %.1f s, %s" % (
        peer.name, len(workloads), time.perf_counter() - started,
        ", ".join("%s %d" % item for item in counts.items())))
    _print_rules(by_rule, kinds)
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", choices=sorted(PEERS), action="append",
                        help="the peer to run (default: each one this Python has)")
    parser.add_argument("--rules", choices=["safe", "hazard", "all"], default="safe")
    parser.add_argument("--seeds", type=int, default=10, help="random workloads per store")
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--length", type=int, default=150, help="steps of a random workload")
    parser.add_argument("--cuts", type=int, default=0,
                        help="cut points drawn per workload (0: every one)")
    parser.add_argument("--samples", type=int, default=3, help="draws of each random rule")
    parser.add_argument("--no-short", action="store_true", help="leave out the short workloads")
    options = parser.parse_args(argv)
    reason = powerfs.unavailable()
    names = options.store or [name for name, peer in PEERS.items() if not peer.unavailable()]
    for name in names:
        reason = reason or PEERS[name].unavailable()
    if reason or not names:
        print("cannot run: %s" % (reason or "neither dbm.gnu nor lmdb is in this Python"))
        return 2
    rules = {"safe": powerloss.SAFE_RULES, "hazard": powerloss.HAZARD_RULES,
             "all": powerloss.SAFE_RULES + powerloss.HAZARD_RULES}[options.rules]
    workloads = [] if options.no_short else list(WORKLOADS.values())
    workloads += [random_workload(seed, options.length) for seed in range(
        options.first_seed, options.first_seed + options.seeds)]
    print("rules %s: %s" % (options.rules, ", ".join("%s/%s" % rule for rule in rules)))
    for name in names:
        run_store(PEERS[name], workloads, rules, options.samples, options.cuts or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
