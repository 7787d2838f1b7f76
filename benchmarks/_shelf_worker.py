"""Times shelves (pickled Python objects) on one contender, in this fresh process.

Run by ``benchmarks/compare.py`` for presets c and d, once per contender
and repetition::

    python benchmarks/_shelf_worker.py CONTENDER --preset c|d --dir TMPDIR --seed S [--quick]

Every contender but sqlitedict, diskcache, rocksdict and zerodep's
persistdict is a ``shelve.Shelf`` over a dbm object, as shelve's users
write it: ``shelve.Shelf(semidbm.open(path, "c"))``; those serialize
values themselves (persistdict as JSON, the others with pickle) and are
used as their own mappings (``SqliteDict``, ``diskcache.Index``,
``rocksdict.Rdict``, ``persistdict.open``), each with its own way to
sync (see their classes). dbm.sqlite3 runs on a Python 3.13 of its own.
Each timed pass opens the shelf, does its work and closes it: that is
how a shelf is used, and where each contender flushes.

Preset c, small objects: for 50 and for 2,000 items (dicts of a few
fields), ``write`` (a new shelf, set every item, close), ``read`` (open,
read every key, close) and ``iterate`` (open, go through ``items()``,
close). These passes are short, so each one is repeated until it has
run for ``MIN_SECONDS`` (at least ``MIN_ROUNDS`` times), each write into
a new shelf, and the median pass counts.

Preset d, a large-object cache: 5,000 values of 1,000,000 bytes
(``bytes`` objects, pickled as they are), ``write`` (a new shelf, set
every value, ``sync()`` after every 250, close), then ``read_cold``
(the files evicted from the page cache by ``_pagecache``, then open,
read every key, close) and ``read_warm`` (the same again, cached).

The figures are items per second. Every pass checks what it read
against what was written; a mismatch ends the process with an error.
Prints one JSON object like ``_worker.py`` does; a contender whose
module cannot be imported prints ``{"contender": ..., "missing": reason}``.
"""

import argparse
import json
import os
import random
import shelve
import shutil
import sys
from time import perf_counter

import _pagecache
import _worker
from _worker import (
    DiskcacheStore,
    RocksdictStore,
    Sqlite3Store,
    describe,
    import_our_semidbm,
    import_semidbm_051,
    median_pass,
    sqlite_version,
)

#: Preset c: the item counts, each with its own write, read and iterate rows.
SMALL_COUNTS = (50, 2000)

#: Preset c: each pass repeats until it has run this long in all...
MIN_SECONDS = 0.3

#: ... and at least this many times.
MIN_ROUNDS = 5

#: Preset d: the number of values, their size and the writes between syncs.
LARGE_COUNT = 5000
LARGE_SIZE = 1_000_000
SYNC_EVERY = 250

#: Preset d: the distinct values, taken in turn (5,000 distinct megabytes
#: would take 5 GB of memory before anything is timed).
LARGE_POOL = 32


class ShelfContender:
    """Opens shelves over one dbm module; subclasses name the module and its durability.

    ``durability_note``, as in ``_worker.Contender``: how the durability
    differs from semidbm's, for the terminal summary (None: it does not).
    """

    durability_note = None

    def open(self, path, flag):
        """Return a shelf on the db at ``path``, opened with dbm flag ``flag``."""
        return shelve.Shelf(self.module.open(path, flag))

    def sync(self, shelf):
        """Write what ``shelf`` holds to its db, as the module's ``sync`` does."""
        shelf.sync()

    def close(self, shelf):
        """Close ``shelf`` and its db (flushing it, as the module does by default)."""
        shelf.close()


class OurSemidbm(ShelfContender):
    """Our semidbm on the kernel ``kernel``, which ``semidbm.implementation`` must name."""

    durability = "sync() and close() write the append buffer and fsync the data file"

    def __init__(self, kernel):
        self.module = import_our_semidbm(kernel)
        self.implementation = "semidbm %s, %s kernel" % (self.module.__version__, kernel)


class Semidbm051(ShelfContender):
    """The original semidbm 0.5.1, from its own virtual environment.

    Its read-only db refuses ``sync()``, which ``shelve.Shelf.close()``
    calls, so a read-only shelf here closes its db directly (there is
    nothing to write back).
    """

    durability = "every write goes straight to the file; sync() and close() fsync"
    durability_note = _worker.Semidbm051.durability_note
    implementation = "semidbm 0.5.1, pure Python"
    note = "its read-only db refuses the sync() that shelve's close() calls: reads close the db"

    def __init__(self):
        self.module = import_semidbm_051()
        self.read_only = set()

    def open(self, path, flag):
        shelf = super().open(path, flag)
        if flag == "r":
            self.read_only.add(id(shelf))
        return shelf

    def close(self, shelf):
        if id(shelf) in self.read_only:
            self.read_only.discard(id(shelf))
            shelf.dict.close()
        else:
            shelf.close()


class Gnu(ShelfContender):
    """Shelve on ``dbm.gnu``, the usual backend where the Python has it."""

    durability = (
        "gdbm's default (no 's' flag): sync() and close() msync (MS_SYNC) its mapped file, "
        "as strace shows for gdbm 1.23"
    )

    def __init__(self):
        import dbm.gnu

        self.module = dbm.gnu
        self.implementation = "gdbm, through shelve"


class Dumb(ShelfContender):
    """Shelve on ``dbm.dumb``, the fallback when no other dbm is there."""

    durability = "sync() and close() write the index file; no fsync"
    durability_note = _worker.Dumb.durability_note
    implementation = "Python standard library, through shelve"

    def __init__(self):
        import dbm.dumb

        self.module = dbm.dumb


class SqliteDict(ShelfContender):
    """sqlitedict: a pickling mapping over one SQLite table, committed by hand.

    Opened with its defaults (``autocommit=False``); a write pass ends
    with ``commit()`` and ``close()``, and ``sync`` is ``commit()``.
    """

    durability = "commit() is an SQLite commit: journal, then fsync (SQLite's defaults)"

    def __init__(self):
        import sqlitedict

        self.module = sqlitedict
        self.implementation = "sqlitedict %s, SQLite %s" % (
            sqlitedict.__version__,
            sqlite_version(),
        )

    def open(self, path, flag):
        return self.module.SqliteDict(path, flag=flag)

    def sync(self, shelf):
        shelf.commit()

    def close(self, shelf):
        if shelf.flag != "r":
            shelf.commit()
        shelf.close()


class Diskcache(DiskcacheStore, ShelfContender):
    """diskcache's ``Index`` (see ``_worker.DiskcacheStore``), which pickles values itself.

    Used as its users use it (no shelve). Each set is committed at once,
    so ``sync`` has nothing to do.
    """

    def sync(self, shelf):
        """Nothing to do: every set is already committed."""


class Rocksdict(RocksdictStore, ShelfContender):
    """rocksdict's ``Rdict`` (see ``_worker.RocksdictStore``), which pickles values itself.

    Used as its users use it (no shelve). ``sync`` is ``flush()``, which
    writes the memtable to a table file.
    """

    durability = RocksdictStore.set_durability + (
        "; flush() and close() write the memtable to a table file and fsync it (strace)"
    )

    def sync(self, shelf):
        shelf.flush()


class Sqlite3Dbm(Sqlite3Store, ShelfContender):
    """Shelve on ``dbm.sqlite3``, the module ``shelve.open`` picks first from Python 3.13 on."""

    def __init__(self):
        super().__init__()
        self.implementation += ", through shelve"


class PersistDict(ShelfContender):
    """zerodep's persistdict: a mapping over one of its backends, which stores values as JSON.

    Opened as its users open it, ``persistdict.open(path, backend=NAME)``,
    everything else at its defaults (a lock around each call, the JSON
    serializer); it has no read-only mode, so the flag is not passed.
    ``sync`` is its ``flush()``. The values of preset c (dicts of str,
    int, float and list) are JSON's own; preset d's bytes are not, so
    it runs in preset c only.

    zerodep on PyPI is a command, not the modules: ``zerodep add
    persistdict`` copies ``persistdict.py`` from zerodep's repository into
    a folder, which must be on ``PYTHONPATH`` for this worker to import it.
    """

    def __init__(self, backend):
        try:
            import persistdict
        except ImportError as error:
            raise ImportError(
                "%s (PyPI's zerodep holds only the command that copies it from zerodep's "
                "repository: zerodep add persistdict -d DIR, then PYTHONPATH=DIR)" % error
            ) from error
        if not hasattr(persistdict, "JsonFileBackend"):
            raise ImportError(
                "the module persistdict found is not zerodep's (PyPI's persistdict is another "
                "project): %s" % persistdict.__file__
            )
        self.module = persistdict
        self.backend = backend
        self.implementation = "zerodep persistdict, %s backend, values as JSON" % backend

    def open(self, path, flag):
        return self.module.open(path, backend=self.backend)

    def sync(self, shelf):
        shelf.flush()


class PersistDictJson(PersistDict):
    """persistdict's JSON file backend: the whole mapping in memory, written out whole."""

    durability = (
        "held in memory: flush() and close() write the whole file anew (a temporary file "
        "renamed over it), with no fsync; close() rewrites it after reads too"
    )
    durability_note = (
        "writes only at flush() or close(), the whole file, never fsynced: a killed process "
        "loses every write since"
    )

    def __init__(self):
        super().__init__("json")


class PersistDictSqlite(PersistDict):
    """persistdict's SQLite backend: each set committed at once, in WAL mode."""

    durability = Sqlite3Store.durability
    durability_note = Sqlite3Store.durability_note

    def __init__(self):
        super().__init__("sqlite")
        self.implementation += ", SQLite %s" % sqlite_version()


class InMemoryDict(ShelfContender):
    """``shelve.Shelf`` over a plain dict: the reference in memory, nothing kept in a file."""

    durability = "memory only: nothing survives the process"
    durability_note = _worker.InMemoryDict.durability_note
    implementation = "shelve over a built-in dict, the reference in memory (not a rival)"

    def __init__(self):
        self.dicts = {}

    def open(self, path, flag):
        if flag == "n":
            self.dicts[path] = {}
        return shelve.Shelf(self.dicts[path])

    def close(self, shelf):
        # shelve.Shelf.close() would drop the dict; an in-memory "db" must stay.
        shelf.sync()


CONTENDERS = {
    "semidbm": lambda: OurSemidbm("cython"),
    "semidbm-python": lambda: OurSemidbm("python"),
    "semidbm-0.5.1": Semidbm051,
    "dbm.gnu": Gnu,
    "dbm.dumb": Dumb,
    "sqlitedict": SqliteDict,
    "diskcache": Diskcache,
    "rocksdict": Rocksdict,
    "dbm.sqlite3": Sqlite3Dbm,
    "persistdict-json": PersistDictJson,
    "persistdict-sqlite": PersistDictSqlite,
    "dict": InMemoryDict,
}


def small_items(count, rng):
    """Return ``count`` (key, value) pairs: str keys, dicts of a few fields as values."""
    return [
        (
            "item-%05d" % number,
            {
                "id": number,
                "name": "item number %d" % number,
                "price": round(rng.uniform(1, 100), 2),
                "stock": rng.randrange(1000),
                "tags": rng.sample(["red", "green", "small", "large", "new"], 2),
            },
        )
        for number in range(count)
    ]


def expect(condition, message):
    """End the process with ``message`` unless ``condition`` holds."""
    if not condition:
        sys.exit(message)


def run_small(contender, place, seed, quick):
    """Preset c: write, read and iterate shelves of small items; return items/s by row."""
    rng = random.Random(seed)
    min_seconds, min_rounds = (0.02, 1) if quick else (MIN_SECONDS, MIN_ROUNDS)
    ops = {}
    for count in SMALL_COUNTS:
        items = small_items(count, rng)
        keys = [key for key, _ in items]
        rounds = []

        def write():
            path = "%s/write-%d-%d" % (place, count, len(rounds))
            rounds.append(path)
            start = perf_counter()
            shelf = contender.open(path, "n")
            for key, value in items:
                shelf[key] = value
            contender.close(shelf)
            return perf_counter() - start

        def read():
            start = perf_counter()
            shelf = contender.open(rounds[0], "r")
            got = [shelf[key] for key in keys]
            contender.close(shelf)
            seconds = perf_counter() - start
            expect(got == [value for _, value in items], "read back wrong values")
            return seconds

        def iterate():
            start = perf_counter()
            shelf = contender.open(rounds[0], "r")
            got = dict(shelf.items())
            contender.close(shelf)
            seconds = perf_counter() - start
            expect(got == dict(items), "iterated over wrong items")
            return seconds

        ops["write_%d" % count] = count / median_pass(write, min_seconds, min_rounds)
        # The first round's shelf stays for the reads; the others go now.
        for path in rounds[1:]:
            remove(path)
        ops["read_%d" % count] = count / median_pass(read, min_seconds, min_rounds)
        ops["iterate_%d" % count] = count / median_pass(iterate, min_seconds, min_rounds)
    return ops


def large_pool(seed):
    """Preset d's distinct values: ``LARGE_POOL`` slices of ``LARGE_SIZE`` random bytes.

    The slices are of one random block; the item numbered ``n`` holds
    ``pool[n % LARGE_POOL]``.
    """
    rng = random.Random(seed)
    block = rng.randbytes(2 * LARGE_SIZE)
    return [
        block[start : start + LARGE_SIZE] for start in rng.sample(range(LARGE_SIZE), LARGE_POOL)
    ]


def large_keys(count):
    """Preset d's first ``count`` keys (str, as a shelf takes them)."""
    return ["object-%05d" % number for number in range(count)]


def run_large(contender, place, seed, quick):
    """Preset d: write 1 MB values with periodic syncs, then read them cold and warm."""
    count, every = (100, 25) if quick else (LARGE_COUNT, SYNC_EVERY)
    pool = large_pool(seed)
    keys = large_keys(count)
    path = "%s/large" % place

    start = perf_counter()
    shelf = contender.open(path, "n")
    for number, key in enumerate(keys):
        shelf[key] = pool[number % LARGE_POOL]
        if (number + 1) % every == 0:
            contender.sync(shelf)
    contender.close(shelf)
    ops = {"write": count / (perf_counter() - start)}

    def read():
        start = perf_counter()
        shelf = contender.open(path, "r")
        wrong = [n for n, key in enumerate(keys) if shelf[key] != pool[n % LARGE_POOL]]
        contender.close(shelf)
        seconds = perf_counter() - start
        expect(not wrong, "read back wrong values for %d keys" % len(wrong))
        return seconds

    _pagecache.drop(path)
    ops["read_cold"] = count / read()
    ops["read_warm"] = count / read()
    return ops


def remove(path):
    """Remove the db at ``path``, whatever files or directory it is made of."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    for name in _pagecache.database_files(path):
        os.unlink(name)


def main():
    parser = argparse.ArgumentParser(description="Time shelves on one contender.")
    parser.add_argument("contender", choices=sorted(CONTENDERS))
    parser.add_argument("--preset", choices=["c", "d"], required=True)
    parser.add_argument("--dir", required=True, help="an empty directory for the databases")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--quick", action="store_true", help="small sizes, one round each")
    args = parser.parse_args()
    try:
        contender = CONTENDERS[args.contender]()
    except ImportError as exc:
        print(json.dumps({"contender": args.contender, "missing": str(exc)}))
        return
    run = run_small if args.preset == "c" else run_large
    notes = [contender.note] if hasattr(contender, "note") else []
    if args.preset == "d" and not _pagecache.COLD:
        notes.append("read_cold ran on a warm page cache: this system has no posix_fadvise")
    result = describe(args.contender, contender)
    result["ops_per_sec"] = run(contender, args.dir, args.seed, args.quick)
    result["notes"] = notes
    print(json.dumps(result))


if __name__ == "__main__":
    main()
