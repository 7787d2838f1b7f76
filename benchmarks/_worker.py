"""Times the classic dbm workloads for one contender, in this fresh process.

Run by ``benchmarks/compare.py``, once per contender and repetition, so
that every contender starts from a clean interpreter (and because
semidbm 0.5.1 has the same import name as our package and lives in its
own virtual environment)::

    python benchmarks/_worker.py CONTENDER --keys N --value-size B \\
        --key-size K --dir TMPDIR --seed S [--min-read-seconds T]

It builds the data set first, outside the timed part: keys are the
index zero-padded to the key size (``b"%016d" % i``), values are slices
of one block of random bytes, and the random orders come from ``seed``,
so every contender in a repetition gets the same data. Then it times,
in this order:

- fill_sequential: set every key in index order in a new db, then close it;
- reopen (in another fresh process, see below): open the db that
  fill_sequential wrote, take its length and look up one key;
- read_cold: evict the db's files from the page cache (``_pagecache``),
  then open it and read every key in the order it was written; the open
  is timed too, since semidbm's open reads its index file, or without
  one the whole log (the others read their files lazily);
- read_sequential: reopen, read every key in the order it was written;
- read_random: read every key in a shuffled order;
- read_hot: read keys drawn from a random 1% of them, as many reads as keys;
- delete_sequential: delete every key in index order, then close;
- fill_random: set every key in a shuffled order in a new db, then close it.

A read pass (cold ones included, each after its own eviction) shorter
than ``--min-read-seconds`` (``MIN_READ_SECONDS`` by default) is
repeated until that much time has passed, and the median pass counts:
on small data sets one pass takes milliseconds, too short to time on a
shared machine.

Opening a db is not timed (but for reopen); closing a written one always
is, since that is where a dbm flushes its writes (each contender at its
default durability, described in the output). The results are read back
and compared in the same run: any mismatch ends the process with an error.

The reopen runs in a child process (this script with ``--reopen``) so
that it also measures the memory the reopened db keeps: a process that
has just filled a db may hold freed memory its allocator reuses, which
would hide part of it. The child builds the data set, reads its
anonymous resident memory (RssAnon, after ``gc.collect()``), reopens the
db, reads it again and reports the difference per key. For the dict,
which has no file, the child builds the dict from the data set instead,
and nothing is timed.

With values of ``COPY_RATE_MIN_VALUE`` bytes or more, it also measures how
fast this process copies values of that size into new bytes objects,
which every read must do: the ceiling for reading large values.

Prints one JSON object: the contender's name, implementation, Python
version, durability, number of keys, operations per second for each workload (None for
a workload that does not apply), the reopen's seconds, the index memory
in bytes per key, the copy rate and notes on anything measured
differently. A contender whose module cannot be
imported prints ``{"contender": ..., "missing": reason}`` instead.
"""

import argparse
import gc
import json
import platform
import random
import statistics
import subprocess
import sys
from time import perf_counter

import _pagecache

#: Keys whose values are compared after each pass (fewer if there are fewer keys).
SAMPLE_SIZE = 1000

#: Smallest block of random bytes that the values are sliced from.
BLOCK_SIZE = 1 << 20

#: Smallest LMDB map size: room for its meta pages and a small tree.
MIN_MAP_SIZE = 1 << 20

#: A read pass is repeated until this much time has passed in all (by default) ...
MIN_READ_SECONDS = 0.25

#: ... but at most this many times; the median pass counts.
MAX_READ_PASSES = 50

#: Values at least this large get the copy rate measured.
COPY_RATE_MIN_VALUE = 4096


class Contender:
    """A dbm module under test: how to open, fill, read and delete in its databases.

    The defaults drive a dbm object (``db[key]`` in a plain loop).
    Subclasses import their module in ``__init__`` (so a missing one
    raises ImportError there) and set ``implementation`` and
    ``durability`` for the report; one that is not a dbm overrides the
    timed methods with its own plain loops. diskcache, rocksdict and
    dbm.sqlite3 take those from a class the shelf worker shares
    (``DiskcacheStore``, ``RocksdictStore``, ``Sqlite3Store``).
    """

    #: At most this many keys are deleted in delete_sequential (None: all).
    max_deletes = None

    #: What this contender measures differently, for the report (None: nothing).
    note = None

    #: How its durability differs from semidbm's (whose writes are durable once
    #: sync() or close() returns), in a few words for the terminal summary;
    #: None where it does not.
    durability_note = None

    def open(self, path, flag):
        """Open the db at ``path`` with a dbm flag ("n", "r" or "w")."""
        return self.module.open(path, flag)

    def close(self, db):
        """Close ``db``, flushing what was written as the module does by default."""
        db.close()

    def length(self, db):
        """Return the number of keys in ``db``."""
        return len(db)

    def lookup(self, db, key):
        """Return the value of ``key`` in ``db``, or None if it is not there."""
        return db[key] if key in db else None

    def time_fill(self, path, items):
        """Set each ``(key, value)`` of ``items`` in a new db at ``path``; return seconds taken."""
        db = self.open(path, "n")
        start = perf_counter()
        for key, value in items:
            db[key] = value
        self.close(db)
        return perf_counter() - start

    def time_reads(self, db, keys):
        """Read ``db[key]`` for each of ``keys``; return seconds taken."""
        start = perf_counter()
        for key in keys:
            db[key]
        return perf_counter() - start

    def time_cold_reads(self, path, keys):
        """Open the db at ``path`` and read ``keys``; return the seconds both took.

        The caller has just evicted the db's files from the page cache.
        """
        start = perf_counter()
        db = self.open(path, "r")
        for key in keys:
            db[key]
        seconds = perf_counter() - start
        self.close(db)
        return seconds

    def time_deletes(self, path, keys):
        """Delete ``keys`` from the db at ``path``, then close it; return seconds taken."""
        db = self.open(path, "w")
        start = perf_counter()
        for key in keys:
            del db[key]
        self.close(db)
        return perf_counter() - start

    def time_reopen(self, path, keys, values):
        """Open the db at ``path``, take its length and look up one key.

        The db holds ``keys`` and ``values`` as fill_sequential left it;
        the key looked up is the middle one. Returns ``(seconds, db)``:
        the db stays open, so that the caller can measure the memory it
        keeps, and must close it.
        """
        key = keys[len(keys) // 2]
        start = perf_counter()
        db = self.open(path, "r")
        self.length(db)
        db[key]
        return perf_counter() - start, db


def import_our_semidbm(kernel):
    """Import our semidbm; exit unless it is ours (not 0.5.1) and runs on ``kernel``."""
    import semidbm

    if semidbm.__version__ == "0.5.1":
        sys.exit("expected our semidbm, but this interpreter imports semidbm 0.5.1")
    if semidbm.implementation != kernel:
        sys.exit("expected the %s kernel, got %s" % (kernel, semidbm.implementation))
    return semidbm


def import_semidbm_051():
    """Import semidbm; exit unless it is the original 0.5.1."""
    import semidbm

    if semidbm.__version__ != "0.5.1":
        sys.exit("expected semidbm 0.5.1, this interpreter imports %s" % semidbm.__version__)
    return semidbm


def sqlite_version():
    """Return the version of the SQLite library this Python's sqlite3 module uses."""
    import sqlite3

    return sqlite3.sqlite_version


def package_version(name):
    """Return the installed version of the distribution ``name``, for packages without one."""
    import importlib.metadata

    return importlib.metadata.version(name)


def describe(name, contender):
    """The start of a worker's JSON result: what ran, on which Python, how durably.

    ``durability_note`` is the contender's own, if its class has one (the
    classic and shelf workers' contenders do), else None.
    """
    return {
        "contender": name,
        "implementation": contender.implementation,
        "python": "%s %s" % (platform.python_implementation(), platform.python_version()),
        "durability": contender.durability,
        "durability_note": getattr(contender, "durability_note", None),
    }


class OurSemidbm(Contender):
    """Our semidbm, on the kernel ``semidbm.implementation`` names, which must be ``kernel``."""

    durability = "close() writes its buffer and fsyncs the data file"

    def __init__(self, kernel):
        self.module = import_our_semidbm(kernel)
        self.implementation = "semidbm %s, %s kernel" % (self.module.__version__, kernel)


class Semidbm051(Contender):
    """The original pure-Python semidbm 0.5.1 from PyPI."""

    durability = "every write goes straight to the file; close() fsyncs"
    implementation = "semidbm 0.5.1, pure Python"
    durability_note = (
        "unbuffered: each write reaches the file at once (a killed process loses none)"
    )

    def __init__(self):
        self.module = import_semidbm_051()

    def length(self, db):
        """Return the number of keys: 0.5.1 has no ``len()``, but its ``keys()`` is a dict view."""
        return len(db.keys())


class Gnu(Contender):
    """``dbm.gnu``: the C library gdbm."""

    durability = (
        "gdbm's default (no 's' flag): close() msyncs (MS_SYNC) its mapped file, "
        "as strace shows for gdbm 1.23"
    )

    def __init__(self):
        import _gdbm
        import dbm.gnu

        self.module = dbm.gnu
        version = getattr(_gdbm, "_GDBM_VERSION", None)
        self.implementation = "gdbm " + ".".join(map(str, version)) if version else "gdbm"


class Dumb(Contender):
    """``dbm.dumb``: the standard library's pure-Python fallback.

    Its delete rewrites the whole index file, so deleting n keys takes
    O(n^2) time (hours for 100,000 keys): delete_sequential times only
    the first ``max_deletes`` keys.
    """

    durability = "close() writes the index file; no fsync"
    implementation = "Python standard library"
    durability_note = "never fsyncs: a power loss may lose what close() wrote"
    max_deletes = 100

    def __init__(self):
        import dbm.dumb

        self.module = dbm.dumb


class Lmdb(Contender):
    """LMDB through its own Python binding, called the way its users call it.

    A db is an LMDB environment (a directory). Every timed loop is the
    binding's native call in a plain loop: a fill is one write
    transaction of ``txn.put``, committed, then the environment closed;
    a read pass is one read transaction of ``txn.get``; a delete is one
    write transaction of ``txn.delete``, committed, then closed.
    Everything else is at LMDB's defaults, durability among them: the
    commit flushes the data and then the meta page to disk.
    """

    durability = (
        "default sync=True, metasync=True: the commit fdatasyncs the data file, then "
        "writes the meta page through an O_DSYNC descriptor (strace); close() adds nothing"
    )

    def __init__(self, map_size):
        import lmdb

        self.module = lmdb
        self.map_size = map_size
        self.implementation = "py-lmdb %s, LMDB %s; map_size %d MiB" % (
            lmdb.__version__,
            ".".join(map(str, lmdb.version())),
            map_size >> 20,
        )

    def open(self, path, flag):
        """Open the environment at ``path``, read-only for flag "r".

        Flag "n" makes a new one only because the worker's fill paths do
        not exist yet (``lmdb.open`` creates the directory).
        """
        return self.module.open(path, map_size=self.map_size, readonly=flag == "r")

    def length(self, env):
        """Return the number of entries, from a read transaction's statistics."""
        with env.begin() as txn:
            return txn.stat()["entries"]

    def lookup(self, env, key):
        """Return the value of ``key`` (None if absent), in a read transaction of its own."""
        with env.begin() as txn:
            return txn.get(key)

    def time_fill(self, path, items):
        """Put ``items`` in one write transaction of a new environment, commit, close; time it."""
        env = self.open(path, "n")
        start = perf_counter()
        with env.begin(write=True) as txn:
            for key, value in items:
                txn.put(key, value)
        env.close()
        return perf_counter() - start

    def time_reads(self, env, keys):
        """Get each of ``keys`` in one read transaction (begun untimed); return seconds taken."""
        with env.begin() as txn:
            start = perf_counter()
            for key in keys:
                txn.get(key)
            return perf_counter() - start

    def time_cold_reads(self, path, keys):
        """Open the environment and get ``keys`` in one read transaction; time both."""
        start = perf_counter()
        env = self.open(path, "r")
        with env.begin() as txn:
            for key in keys:
                txn.get(key)
        seconds = perf_counter() - start
        env.close()
        return seconds

    def time_deletes(self, path, keys):
        """Delete ``keys`` in one write transaction, commit, close; return seconds taken."""
        env = self.open(path, "w")
        start = perf_counter()
        with env.begin(write=True) as txn:
            for key in keys:
                txn.delete(key)
        env.close()
        return perf_counter() - start

    def time_reopen(self, path, keys, values):
        """Open the environment, read its number of entries and one key in one read transaction."""
        key = keys[len(keys) // 2]
        start = perf_counter()
        env = self.open(path, "r")
        with env.begin() as txn:
            txn.stat()["entries"]
            txn.get(key)
        return perf_counter() - start, env


class DiskcacheStore:
    """diskcache's ``Index`` as both workers import, open, close and describe it.

    An ``Index`` is diskcache's persistent dict, a ``Cache`` that never
    evicts. Chosen over ``diskcache.Cache`` because a Cache at its
    defaults evicts entries once it holds 1 GB (``size_limit``): it is a
    cache, not a store, and a dbm must keep every key. Everything else is
    at diskcache's defaults: SQLite in WAL mode with
    ``synchronous=NORMAL``, values of 32 KiB and more in files of their
    own; close is ``index.cache.close()``.
    """

    durability = (
        "each set is its own SQLite transaction in WAL mode, synchronous=NORMAL (diskcache's "
        "default): no fsync per commit, only at WAL checkpoints, so a power loss may lose the "
        "last commits; values of 32 KiB and more go to files of their own, never fsynced"
    )
    durability_note = (
        "each set its own commit (a killed process loses none), fsynced only at checkpoints"
    )

    def __init__(self):
        import diskcache

        self.module = diskcache
        self.implementation = "diskcache %s (Index), SQLite %s" % (
            diskcache.__version__,
            sqlite_version(),
        )

    def open(self, path, flag):
        """Open the Index in the directory ``path`` (diskcache has no read-only mode)."""
        return self.module.Index(path)

    def close(self, db):
        """Close the Index's cache, which holds its SQLite connection."""
        db.cache.close()


class DiskcacheIndex(DiskcacheStore, Contender):
    """diskcache's ``Index`` (see ``DiskcacheStore``) under the dbm workloads.

    Each set, get and delete is its own SQLite statement, called as a
    mapping (``index[key]``).
    """


class RocksdictStore:
    """rocksdict's ``Rdict`` as both workers import, open and describe it.

    ``Rdict(path)`` with no options (its default, non-raw mode, which
    stores bytes with a one-byte type tag). Each worker's ``durability``
    adds, to ``set_durability``, what the calls it flushes with do.
    """

    #: How a set reaches the disk, the start of both workers' durability.
    set_durability = (
        "each set is appended to RocksDB's write-ahead log without fsync (WriteOptions "
        "sync=False, the default), so a process crash loses nothing but a power loss may "
        "lose the last writes"
    )
    durability_note = "each set reaches its write-ahead log at once (a killed process loses none)"

    def __init__(self):
        import rocksdict

        self.module = rocksdict
        self.implementation = "rocksdict %s (Rdict), RocksDB" % package_version("rocksdict")

    def open(self, path, flag):
        """Open the Rdict at ``path`` with the default options, whatever the flag."""
        return self.module.Rdict(path)


class Rocksdict(RocksdictStore, Contender):
    """rocksdict's ``Rdict`` (see ``RocksdictStore``) under the dbm workloads.

    ``close()`` flushes the memtable to disk. An Rdict has no ``len()``:
    the length is counted by going through its keys, and the reopen
    workload leaves it out.
    """

    durability = RocksdictStore.set_durability + (
        "; close() flushes the memtable to a table file and fsyncs it (strace)"
    )
    note = "reopen times the open and one get only: an Rdict keeps no length"

    def length(self, db):
        """Return the number of keys, counted by going through them."""
        return sum(1 for _ in db.keys())

    def lookup(self, db, key):
        return db.get(key)

    def time_reopen(self, path, keys, values):
        """Open the Rdict and get one key: it has no length to take."""
        key = keys[len(keys) // 2]
        start = perf_counter()
        db = self.open(path, "r")
        db[key]
        return perf_counter() - start, db


class Sqlite3Store:
    """``dbm.sqlite3`` (Python 3.13 and later) as both workers import and describe it.

    Run by a Python 3.13 of its own (``compare.py`` finds it), since the
    benchmark's own Python is older. At its defaults: each set and
    delete is a transaction of its own (the connection is in autocommit
    mode) in WAL mode.
    """

    durability = (
        "each set and delete is its own SQLite transaction in WAL mode at SQLite's default "
        "synchronous=FULL: every commit fsyncs the write-ahead log"
    )
    durability_note = "each set and delete is a commit that fsyncs: durable when it returns"

    def __init__(self):
        import dbm.sqlite3

        self.module = dbm.sqlite3
        self.implementation = "dbm.sqlite3, SQLite %s" % sqlite_version()


class Sqlite3Dbm(Sqlite3Store, Contender):
    """``dbm.sqlite3`` (see ``Sqlite3Store``) under the dbm workloads, as a dbm object."""


class InMemoryDict(Contender):
    """A plain dict: the in-memory reference, since it keeps nothing in a file.

    "Opening" a path returns that path's dict (a new one for flag "n");
    closing does nothing.
    """

    durability = "memory only: nothing survives the process"
    implementation = "built-in dict, the reference in memory (not a rival)"
    durability_note = "the reference in memory, not a rival: it keeps nothing in a file"

    def __init__(self):
        self.dicts = {}

    def open(self, path, flag):
        if flag == "n":
            self.dicts[path] = {}
        return self.dicts[path]

    def close(self, db):
        pass

    def time_reopen(self, path, keys, values):
        """Build the dict from the data set: there is no file to reopen, so nothing is timed."""
        return None, dict(zip(keys, values))

    def time_cold_reads(self, path, keys):
        """A dict has no file that could be cold: nothing is timed."""
        return None


def lmdb_map_size(args):
    """Return LMDB's map size: 8 times the data set's size, rounded up to a power of two."""
    wanted = 8 * args.keys * (args.key_size + args.value_size)
    return max(MIN_MAP_SIZE, 1 << (wanted - 1).bit_length())


#: How to make each contender, by the name ``compare.py`` passes, from the arguments.
CONTENDERS = {
    "semidbm": lambda args: OurSemidbm("cython"),
    "semidbm-python": lambda args: OurSemidbm("python"),
    "semidbm-0.5.1": lambda args: Semidbm051(),
    "dbm.gnu": lambda args: Gnu(),
    "dbm.dumb": lambda args: Dumb(),
    "lmdb": lambda args: Lmdb(lmdb_map_size(args)),
    "diskcache": lambda args: DiskcacheIndex(),
    "rocksdict": lambda args: Rocksdict(),
    "dbm.sqlite3": lambda args: Sqlite3Dbm(),
    "dict": lambda args: InMemoryDict(),
}


def make_data(count, key_size, value_size, seed):
    """Return ``(keys, values, rng)``: the data set and the random source for the orders."""
    if len(str(count - 1)) > key_size:
        sys.exit("--key-size %d is too small for %d keys" % (key_size, count))
    rng = random.Random(seed)
    block = rng.randbytes(max(BLOCK_SIZE, 2 * value_size))
    room = len(block) - value_size
    keys = [b"%0*d" % (key_size, i) for i in range(count)]
    starts = ((i * value_size) % room for i in range(count))
    values = [block[start : start + value_size] for start in starts]
    return keys, values, rng


def shuffled(items, rng):
    """Return a shuffled copy of ``items``."""
    items = list(items)
    rng.shuffle(items)
    return items


def anonymous_memory():
    """Return this process's anonymous resident memory in bytes (RssAnon, Linux only).

    Collects garbage first, so that the figure holds only what is reachable.
    """
    gc.collect()
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    sys.exit("no RssAnon in /proc/self/status")


def median_pass(run_pass, min_seconds, min_passes=1, max_passes=None):
    """Call ``run_pass()`` (it returns seconds) repeatedly; return the median of its times.

    It runs at least ``min_passes`` times, and on until ``min_seconds``
    have passed in all, but no more than ``max_passes`` times (if given).
    A pass over a small data set (preset b's 1,000 keys) takes a few
    milliseconds, which a moment of the machine's other work can double;
    a pass over a million keys runs once or twice.
    """
    times = []
    while len(times) < min_passes or (
        sum(times) < min_seconds and (max_passes is None or len(times) < max_passes)
    ):
        times.append(run_pass())
    return statistics.median(times)


def copy_rate(value_size, count):
    """Return the bytes per second at which this process copies ``value_size``-byte values.

    It slices ``count`` values (at least 64 MiB in all, more than the CPU's
    caches hold) out of one bytes object, each slice a new bytes object,
    as a read of a value makes one: the best of three passes.
    """
    count = max(count, -(-(64 << 20) // value_size))
    source = b"\x5a" * (count * value_size)
    best = float("inf")
    for _ in range(3):
        start = perf_counter()
        for offset in range(0, len(source), value_size):
            source[offset : offset + value_size]
        best = min(best, perf_counter() - start)
    return len(source) / best


def check_contents(contender, db, present, absent, expected_length):
    """Exit with an error unless ``db`` holds exactly the expected data.

    ``present`` is a list of ``(key, value)`` pairs that must be found
    with those values, ``absent`` a list of keys that must not be found.
    """
    length = contender.length(db)
    if length != expected_length:
        sys.exit("db has %d keys, expected %d" % (length, expected_length))
    for key, value in present:
        if contender.lookup(db, key) != value:
            sys.exit("wrong value for key %r" % (key,))
    for key in absent:
        if contender.lookup(db, key) is not None:
            sys.exit("deleted key %r is still there" % (key,))


def sequential_path(args):
    """Return the path of the db that fill_sequential writes."""
    return "%s/sequential" % args.dir


def measure_reopen(contender, args):
    """Reopen the db fill_sequential wrote; return ``(seconds or None, index bytes per key)``.

    Run in a fresh process (``--reopen``). The data set is built before
    the first memory reading, so that only what the reopened db keeps
    is counted.
    """
    count = args.keys
    keys, values, rng = make_data(count, args.key_size, args.value_size, args.seed)
    # Sampled by index, so as to leave no garbage behind before the first reading.
    sample = [(keys[i], values[i]) for i in rng.sample(range(count), min(count, SAMPLE_SIZE))]
    before = anonymous_memory()
    seconds, db = contender.time_reopen(sequential_path(args), keys, values)
    after = anonymous_memory()
    check_contents(contender, db, sample, [], count)
    contender.close(db)
    return seconds, (after - before) / count


def reopen_in_child(args):
    """Run ``measure_reopen`` in a fresh process of this interpreter; return its result."""
    command = [sys.executable, __file__, "--reopen"] + sys.argv[1:]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("the reopen failed (exit status %d):\n%s" % (done.returncode, done.stderr.strip()))
    return json.loads(done.stdout)


def run(contender, args):
    """Time every workload on ``contender``; return the results for the JSON output.

    That is a dict: ``ops_per_sec`` by workload, ``reopen_seconds``,
    ``index_bytes_per_key`` and ``notes``.
    """
    count = args.keys
    keys, values, rng = make_data(count, args.key_size, args.value_size, args.seed)
    pairs = list(zip(keys, values))
    sample = rng.sample(pairs, min(count, SAMPLE_SIZE))
    random_keys = shuffled(keys, rng)
    hot_keys = rng.choices(rng.sample(keys, max(1, count // 100)), k=count)
    random_pairs = shuffled(pairs, rng)
    # keys[:None] is every key.
    deleted = keys[: contender.max_deletes]
    random_path = "%s/random" % args.dir

    ops = {}
    notes = [contender.note] if contender.note else []
    ops["fill_sequential"] = count / contender.time_fill(sequential_path(args), pairs)
    reopen = reopen_in_child(args)

    def cold_pass():
        _pagecache.drop(sequential_path(args))
        return contender.time_cold_reads(sequential_path(args), keys)

    if isinstance(contender, InMemoryDict):
        seconds = cold_pass()
    else:
        seconds = median_pass(cold_pass, args.min_read_seconds, max_passes=MAX_READ_PASSES)
    ops["read_cold"] = None if seconds is None else count / seconds
    if seconds is not None and not _pagecache.COLD:
        notes.append("read_cold ran on a warm page cache: this system has no posix_fadvise")

    db = contender.open(sequential_path(args), "r")
    for workload, order in [
        ("read_sequential", keys),
        ("read_random", random_keys),
        ("read_hot", hot_keys),
    ]:
        seconds = median_pass(
            lambda: contender.time_reads(db, order),
            args.min_read_seconds,
            max_passes=MAX_READ_PASSES,
        )
        ops[workload] = count / seconds
    check_contents(contender, db, sample, [], count)
    contender.close(db)

    ops["delete_sequential"] = len(deleted) / contender.time_deletes(sequential_path(args), deleted)
    if len(deleted) < count:
        notes.append(
            "delete_sequential timed over the first %d of the %d keys only" % (len(deleted), count)
        )
    gone = set(deleted)
    db = contender.open(sequential_path(args), "r")
    check_contents(
        contender,
        db,
        [pair for pair in sample if pair[0] not in gone],
        [key for key, _ in sample if key in gone],
        count - len(deleted),
    )
    contender.close(db)

    ops["fill_random"] = count / contender.time_fill(random_path, random_pairs)
    db = contender.open(random_path, "r")
    check_contents(contender, db, sample, [], count)
    contender.close(db)
    rate = None
    if args.value_size >= COPY_RATE_MIN_VALUE:
        rate = copy_rate(args.value_size, count)
    return {
        "keys": count,
        "ops_per_sec": ops,
        "reopen_seconds": reopen["seconds"],
        "index_bytes_per_key": reopen["bytes_per_key"],
        "copy_bytes_per_sec": rate,
        "notes": notes,
    }


def main():
    parser = argparse.ArgumentParser(description="Time the classic dbm workloads on one contender.")
    parser.add_argument("contender", choices=sorted(CONTENDERS))
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--value-size", type=int, required=True)
    parser.add_argument("--key-size", type=int, required=True)
    parser.add_argument("--dir", required=True, help="an empty directory for the databases")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument(
        "--min-read-seconds",
        type=float,
        default=MIN_READ_SECONDS,
        help="time each read workload for at least this long, in passes (%s)" % MIN_READ_SECONDS,
    )
    parser.add_argument(
        "--reopen",
        action="store_true",
        help="only reopen the db fill_sequential wrote (the worker runs itself so)",
    )
    args = parser.parse_args()

    try:
        contender = CONTENDERS[args.contender](args)
    except ImportError as exc:
        print(json.dumps({"contender": args.contender, "missing": str(exc)}))
        return
    if args.reopen:
        seconds, bytes_per_key = measure_reopen(contender, args)
        print(json.dumps({"seconds": seconds, "bytes_per_key": bytes_per_key}))
        return
    result = describe(args.contender, contender)
    result.update(run(contender, args))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
