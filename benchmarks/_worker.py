"""Times the classic dbm workloads for one contender, in this fresh process.

Run by ``benchmarks/compare.py``, once per contender and repetition, so
that every contender starts from a clean interpreter (and because
semidbm 0.5.1 has the same import name as our package and lives in its
own virtual environment)::

    python benchmarks/_worker.py CONTENDER --keys N --value-size B \\
        --key-size K --dir TMPDIR --seed S

It builds the data set first, outside the timed part: keys are the
index zero-padded to the key size (``b"%016d" % i``), values are slices
of one block of random bytes, and the random orders come from ``seed``,
so every contender in a repetition gets the same data. Then it times,
in this order:

- fill_sequential: set every key in index order in a new db, then close it;
- read_sequential: reopen, read every key in the order it was written;
- read_random: read every key in a shuffled order;
- read_hot: read keys drawn from a random 1% of them, as many reads as keys;
- delete_sequential: delete every key in index order, then close;
- fill_random: set every key in a shuffled order in a new db, then close it.

Opening a db is never timed; closing a written one always is, since that
is where a dbm flushes its writes (each contender at its default
durability, described in the output). The results are read back and
compared in the same run: any mismatch ends the process with an error.

Prints one JSON object: the contender's name, implementation, Python
version, durability, operations per second for each workload and notes
on anything measured differently. A contender whose module cannot be
imported prints ``{"contender": ..., "missing": reason}`` instead.
"""

import argparse
import json
import platform
import random
import sys
from time import perf_counter

#: Keys whose values are compared after each pass (fewer if there are fewer keys).
SAMPLE_SIZE = 1000

#: Smallest block of random bytes that the values are sliced from.
BLOCK_SIZE = 1 << 20


class Contender:
    """A dbm module under test: how to open, close and describe its databases.

    Subclasses import their module in ``__init__`` (so a missing one
    raises ImportError there) and set ``implementation`` and
    ``durability`` for the report.
    """

    #: At most this many keys are deleted in delete_sequential (None: all).
    max_deletes = None

    def open(self, path, flag):
        """Open the db at ``path`` with a dbm flag ("n", "r" or "w")."""
        return self.module.open(path, flag)

    def close(self, db):
        """Close ``db``, flushing what was written as the module does by default."""
        db.close()


class OurSemidbm(Contender):
    """Our semidbm, on the kernel ``semidbm.implementation`` names."""

    durability = "close() writes its buffer and fsyncs the data file"

    def __init__(self, expected_kernel=None):
        import semidbm

        if semidbm.__version__ == "0.5.1":
            sys.exit("expected our semidbm, but this interpreter imports semidbm 0.5.1")
        if expected_kernel is not None and semidbm.implementation != expected_kernel:
            sys.exit("expected the %s kernel, got %s" % (expected_kernel, semidbm.implementation))
        self.module = semidbm
        self.implementation = "semidbm %s, %s kernel" % (semidbm.__version__, semidbm.implementation)


class Semidbm051(Contender):
    """The original pure-Python semidbm 0.5.1 from PyPI."""

    durability = "every write goes straight to the file; close() fsyncs"

    def __init__(self):
        import semidbm

        if semidbm.__version__ != "0.5.1":
            sys.exit("expected semidbm 0.5.1, this interpreter imports %s" % semidbm.__version__)
        self.module = semidbm
        self.implementation = "semidbm 0.5.1, pure Python"


class Gnu(Contender):
    """``dbm.gnu``: the C library gdbm."""

    durability = (
        "gdbm's default (no 's' flag): close() msyncs (MS_SYNC) its mapped file, "
        "as strace shows for gdbm 1.23"
    )

    def __init__(self):
        import dbm.gnu
        import _gdbm

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
    max_deletes = 100

    def __init__(self):
        import dbm.dumb

        self.module = dbm.dumb


class InMemoryDict(Contender):
    """A plain dict: the ceiling that no db keeping its data in a file can beat.

    "Opening" a path returns that path's dict (a new one for flag "n");
    closing does nothing.
    """

    durability = "memory only"
    implementation = "built-in dict"

    def __init__(self):
        self.dicts = {}

    def open(self, path, flag):
        if flag == "n":
            self.dicts[path] = {}
        return self.dicts[path]

    def close(self, db):
        pass


#: How to make each contender, by the name ``compare.py`` passes.
CONTENDERS = {
    "semidbm-python": lambda: OurSemidbm(expected_kernel="python"),
    "semidbm": OurSemidbm,
    "semidbm-0.5.1": Semidbm051,
    "dbm.gnu": Gnu,
    "dbm.dumb": Dumb,
    "dict": InMemoryDict,
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


def time_fill(contender, path, items):
    """Set each ``(key, value)`` of ``items`` in a new db at ``path``; return seconds taken."""
    db = contender.open(path, "n")
    start = perf_counter()
    for key, value in items:
        db[key] = value
    contender.close(db)
    return perf_counter() - start


def time_reads(db, keys):
    """Read ``db[key]`` for each of ``keys``; return seconds taken."""
    start = perf_counter()
    for key in keys:
        db[key]
    return perf_counter() - start


def time_deletes(contender, path, keys):
    """Delete ``keys`` from the db at ``path``, then close it; return seconds taken."""
    db = contender.open(path, "w")
    start = perf_counter()
    for key in keys:
        del db[key]
    contender.close(db)
    return perf_counter() - start


def check_contents(db, present, absent, expected_length):
    """Exit with an error unless ``db`` holds exactly the expected data.

    ``present`` is a list of ``(key, value)`` pairs that must be found
    with those values, ``absent`` a list of keys that must not be found.
    """
    # len(db.keys()): semidbm 0.5.1 has keys() but no len().
    length = len(db.keys())
    if length != expected_length:
        sys.exit("db has %d keys, expected %d" % (length, expected_length))
    for key, value in present:
        if db[key] != value:
            sys.exit("wrong value for key %r" % (key,))
    for key in absent:
        if key in db:
            sys.exit("deleted key %r is still there" % (key,))


def run(contender, args):
    """Time every workload on ``contender``; return ``(ops per second by workload, notes)``."""
    count = args.keys
    keys, values, rng = make_data(count, args.key_size, args.value_size, args.seed)
    pairs = list(zip(keys, values))
    sample = rng.sample(pairs, min(count, SAMPLE_SIZE))
    random_keys = shuffled(keys, rng)
    hot_keys = rng.choices(rng.sample(keys, max(1, count // 100)), k=count)
    random_pairs = shuffled(pairs, rng)
    # keys[:None] is every key.
    deleted = keys[: contender.max_deletes]
    sequential_path = "%s/sequential" % args.dir
    random_path = "%s/random" % args.dir

    ops = {}
    notes = []
    ops["fill_sequential"] = count / time_fill(contender, sequential_path, pairs)

    db = contender.open(sequential_path, "r")
    ops["read_sequential"] = count / time_reads(db, keys)
    ops["read_random"] = count / time_reads(db, random_keys)
    ops["read_hot"] = count / time_reads(db, hot_keys)
    check_contents(db, sample, [], count)
    contender.close(db)

    ops["delete_sequential"] = len(deleted) / time_deletes(contender, sequential_path, deleted)
    if len(deleted) < count:
        notes.append(
            "delete_sequential timed over the first %d of the %d keys only" % (len(deleted), count)
        )
    gone = set(deleted)
    db = contender.open(sequential_path, "r")
    check_contents(
        db,
        [pair for pair in sample if pair[0] not in gone],
        [key for key, _ in sample if key in gone],
        count - len(deleted),
    )
    contender.close(db)

    ops["fill_random"] = count / time_fill(contender, random_path, random_pairs)
    db = contender.open(random_path, "r")
    check_contents(db, sample, [], count)
    contender.close(db)
    return ops, notes


def main():
    parser = argparse.ArgumentParser(description="Time the classic dbm workloads on one contender.")
    parser.add_argument("contender", choices=sorted(CONTENDERS))
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--value-size", type=int, required=True)
    parser.add_argument("--key-size", type=int, required=True)
    parser.add_argument("--dir", required=True, help="an empty directory for the databases")
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args()

    try:
        contender = CONTENDERS[args.contender]()
    except ImportError as exc:
        print(json.dumps({"contender": args.contender, "missing": str(exc)}))
        return
    ops, notes = run(contender, args)
    print(
        json.dumps(
            {
                "contender": args.contender,
                "implementation": contender.implementation,
                "python": "%s %s" % (platform.python_implementation(), platform.python_version()),
                "durability": contender.durability,
                "ops_per_sec": ops,
                "notes": notes,
            }
        )
    )


if __name__ == "__main__":
    main()
