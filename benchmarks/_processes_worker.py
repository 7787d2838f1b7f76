"""Times several processes on one store, for one contender, in this fresh process.

Run by ``benchmarks/compare.py`` for preset e, once per contender and
repetition::

    python benchmarks/_processes_worker.py CONTENDER --preset e --dir TMPDIR --seed S [--quick]

The data set is the classic one (``_worker.make_data``): keys of 16
bytes, values of 100 bytes, the same for every contender of a
repetition. Every operation is its own lock or transaction: a put is
``db[key] = value`` on a shared semidbm writer, dbm.sqlite3 or
diskcache, and one write transaction of one ``put`` on LMDB; a read is
``db[key]``, on LMDB in a read transaction of its own. The workloads,
each run by ``PROCESSES`` processes forked from this one:

- fill_4_writers: the processes put their own share of the keys (a
  contiguous quarter, in index order) into one new store;
- mixed_4_processes: on the store the fill left, each process runs its
  own random list of operations: 90% reads of any key, 10% puts of a
  new value for a key of its own share. Afterwards every key must hold
  its last value: the one its owner put last, or the fill's.

The store is made empty by this process first. Each process builds its
work, opens the store and touches every key and value of its work (a
forked process copies a page of its parent's on its first write there,
and Python writes an object's reference count when it reads it: that
copy is the benchmark's cost, not the store's) before the clock starts;
then they all wait at a barrier, and the time counts from the first
one's start to the last one's end, closing left out (each operation is
already in the file when it returns). The slow contenders (``_presets.PROCESS_SLOW``) run a
fraction of the operations.

For our semidbm (both kernels), two measurements of its own:

- alone: one process, no other, writes the keys into a new database
  with a shared writer (flag ``"cm"``) and with the exclusive writer
  (flag ``"n"``), in single puts and in ``update()`` calls of
  ``UPDATE_ITEMS`` items; the figure is the shared rate over the
  exclusive one. Closing is left out of both.
- pool: a read-only handle, pickled (``pickle.dumps``), is sent to the
  ``POOL_WORKERS`` workers of a ``ProcessPoolExecutor`` (started and
  waiting before the clock starts), each of which unpickles it and reads
  its half of the keys in a shuffled order; against one process that
  opens the database and reads every key in the same order. The workers
  and the one process touch the keys first, as the other workloads do.
  Each worker's open is the time from its start to its first value read:
  ``pickle.loads`` of the handle and its first ``db[key]``.

Contenders that cannot have several processes writing one store are
reported so (``{"contender": ..., "cannot": reason}``): gdbm and RocksDB
refuse a second writer process (the worker has one try, and gives the
error it got); dbm.dumb and semidbm 0.5.1 have no lock between
processes at all (``LOCKLESS``). Every run checks what it read back; a
mismatch ends the process with an error. Prints one JSON object like
``_worker.py`` does; a contender whose module cannot be imported prints
``{"contender": ..., "missing": reason}``.
"""

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import pickle
import queue
import random
import statistics
import sys
from time import perf_counter

from _presets import PROCESS_SIZES, PROCESS_SLOW
from _worker import (
    SAMPLE_SIZE,
    DiskcacheStore,
    Sqlite3Store,
    describe,
    import_our_semidbm,
    make_data,
    shuffled,
)

#: The processes of the fill and the mixed workload.
PROCESSES = 4

#: The mixed workload's share of puts; the rest are reads.
WRITE_SHARE = 0.1

#: Items per ``update()`` call in the measurement "alone".
UPDATE_ITEMS = 1000

#: Rounds of the measurement "alone", exclusive and shared taking turns.
ALONE_ROUNDS = 3

#: The worker processes that the pickled handle is sent to.
POOL_WORKERS = 2

#: Bytes per key and per value (the classic presets' defaults).
KEY_SIZE = 16
VALUE_SIZE = 100

#: Seconds a process waits for the others at the barrier before it gives up.
BARRIER_SECONDS = 120

#: The stores with no lock between processes: why several processes cannot write one.
LOCKLESS = {
    "dbm.dumb": (
        "no lock between processes: each writer keeps the whole index in memory and "
        "rewrites the .dir file from it, so the last to write it drops the keys the others "
        "added, and two writers can pick the same place at the end of the .dat file"
    ),
    "semidbm-0.5.1": (
        "no lock between processes: each writer keeps its own index and its own idea of "
        "where the file ends, so once another process appends, its index points at the "
        "wrong bytes until it reopens, and a compaction drops what the others wrote"
    ),
}

#: LMDB's map: this many times the bytes of the keys and values, and at least...
MAP_SIZE_FACTOR = 64

#: ... this many bytes.
MIN_MAP_SIZE = 1 << 30

#: The fork start method: the processes inherit the data set and the contender.
FORK = multiprocessing.get_context("fork")

#: The spawn start method: a fresh interpreter.
SPAWN = multiprocessing.get_context("spawn")


class SharedMapping:
    """A store its users share between processes as a mapping: ``db[key]``, ``db[key] = value``."""

    def put(self, db, key, value):
        db[key] = value

    def get(self, db, key):
        return db[key]

    def length(self, db):
        return len(db)


class SharedSemidbm(SharedMapping):
    """Our semidbm's shared writers (flag ``"cm"``), on ``kernel``, the kernel that must run."""

    #: The flag that opens a shared writer, creating the database if missing.
    flag = "cm"

    durability = (
        "shared writers (flag 'cm'): each operation takes the lock, catches up, appends its "
        "record and writes it to the file before it returns, without fsync: a killed process "
        "loses nothing that returned, a power loss may lose the last writes"
    )

    #: What its reads see, for the report.
    note = (
        "reads take no lock: a shared writer answers from the state of its own last "
        "operation, so a read may miss another process's put made since"
    )

    def __init__(self, kernel):
        self.module = import_our_semidbm(kernel)
        self.implementation = "semidbm %s, %s kernel" % (self.module.__version__, kernel)

    def open(self, path):
        return self.module.open(path, self.flag)

    def close(self, db):
        db.close()


class SharedLmdb:
    """LMDB through py-lmdb, every put its own write transaction, ``sync=False``.

    Its map is large (``MAP_SIZE_FACTOR`` times the data, at least
    ``MIN_MAP_SIZE``): a transaction per put, with readers in other
    processes holding old pages, uses far more pages than one transaction
    of every put, and a map of 8 times the data filled up. The map is
    address space: the file grows only as pages are used.

    ``sync=False`` is not LMDB's default: it is the same class of
    durability as semidbm's shared writers, which the comparison asks for.
    Each process opens the environment itself (an environment must not
    cross a fork); LMDB's own lock file serializes the writers.
    """

    durability = (
        "sync=False (chosen, not LMDB's default): each put is its own write transaction, "
        "committed to the file without fsync: a killed process loses no committed "
        "transaction, a power loss may lose the last ones"
    )

    def __init__(self, keys):
        import lmdb

        self.module = lmdb
        wanted = MAP_SIZE_FACTOR * keys * (KEY_SIZE + VALUE_SIZE)
        self.map_size = max(MIN_MAP_SIZE, 1 << (wanted - 1).bit_length())
        self.implementation = "py-lmdb %s, LMDB %s; map_size %d MiB" % (
            lmdb.__version__,
            ".".join(map(str, lmdb.version())),
            self.map_size >> 20,
        )

    def open(self, path):
        return self.module.open(path, map_size=self.map_size, sync=False)

    def put(self, env, key, value):
        with env.begin(write=True) as txn:
            txn.put(key, value)

    def get(self, env, key):
        with env.begin() as txn:
            return txn.get(key)

    def length(self, env):
        with env.begin() as txn:
            return txn.stat()["entries"]

    def close(self, env):
        env.close()


class SharedDiskcache(SharedMapping, DiskcacheStore):
    """diskcache's ``Index`` (see ``DiskcacheStore``), each process opening the same directory."""

    def open(self, path):
        return DiskcacheStore.open(self, path, "c")


class SharedSqlite3(SharedMapping, Sqlite3Store):
    """``dbm.sqlite3`` (see ``Sqlite3Store``), opened with flag "c" by each process.

    SQLite serializes the writers with its file locks; a writer that
    finds the database locked retries for up to Python's default five
    seconds.
    """

    def open(self, path):
        return self.module.open(path, "c")

    def close(self, db):
        db.close()


def refusing_gdbm(path):
    """Open a gdbm database for writing, created if missing."""
    import dbm.gnu

    return dbm.gnu.open(path, "c")


def refusing_rocksdict(path):
    """Open a RocksDB database (rocksdict's ``Rdict``), created if missing."""
    import rocksdict

    return rocksdict.Rdict(path)


#: How to make each contender that takes part, from the number of keys filled.
CONTENDERS = {
    "semidbm": lambda keys: SharedSemidbm("cython"),
    "semidbm-python": lambda keys: SharedSemidbm("python"),
    "lmdb": SharedLmdb,
    "diskcache": lambda keys: SharedDiskcache(),
    "dbm.sqlite3": lambda keys: SharedSqlite3(),
}

#: The stores that refuse a second writer process: how to open one for writing.
REFUSING = {"dbm.gnu": refusing_gdbm, "rocksdict": refusing_rocksdict}


def second_writer_refusal(opener, path):
    """Return the error a second process gets opening ``path`` for writing while this one has it.

    Returns None if the second process could open it too. The second
    process is a fresh one (spawned, not forked: RocksDB remembers its
    locks per process, so a forked child would meet its parent's); the
    error names the database by its file name only.
    """
    first = opener(path)
    answers = SPAWN.SimpleQueue()
    child = SPAWN.Process(target=try_open, args=(opener, path, answers))
    child.start()
    child.join()
    first.close()
    refusal = answers.get()
    return refusal and refusal.replace(path, os.path.basename(path))


def try_open(opener, path, answers):
    """In a child process: open ``path`` with ``opener``; put None, or the error's text."""
    try:
        opener(path)
    except Exception as error:  # whatever the module raises: its message is the answer
        answers.put("%s: %s" % (type(error).__name__, error))
    else:
        answers.put(None)


class Plan:
    """One workload's data: the keys and values, each process's share and operations.

    ``operations[p]`` lists process ``p``'s operations as ``(key, value)``,
    value None for a read; ``expected`` maps every key to the value it
    must hold once they have all run.
    """

    def __init__(self, keys, values, operations):
        self.operations = operations
        self.expected = dict(zip(keys, values))
        for work in operations:
            for key, value in work:
                if value is not None:
                    self.expected[key] = value


def shares(count):
    """The contiguous ``range`` of key numbers each of the ``PROCESSES`` processes owns."""
    bounds = [count * p // PROCESSES for p in range(PROCESSES + 1)]
    return [range(bounds[p], bounds[p + 1]) for p in range(PROCESSES)]


def fill_plan(keys, values):
    """The fill: each process puts its share of the keys, in index order."""
    work = [[(keys[i], values[i]) for i in share] for share in shares(len(keys))]
    return Plan(keys, values, work)


def mixed_plan(keys, values, per_process, seed):
    """The mixed workload over the filled store: 90% reads of any key, 10% puts of one's own."""
    work = []
    for number, share in enumerate(shares(len(keys))):
        rng = random.Random("%d-%d" % (seed, number))
        operations = []
        for _ in range(per_process):
            if rng.random() < WRITE_SHARE:
                operations.append((keys[rng.choice(share)], values[rng.randrange(len(values))]))
            else:
                operations.append((keys[rng.randrange(len(keys))], None))
        work.append(operations)
    return Plan(keys, values, work)


def run_share(contender, path, operations, barrier, results):
    """In a child process: open the store, wait at the barrier, run ``operations``.

    Puts ``(start, end, None)`` on ``results``, or ``(None, None, error)``
    if something failed (after breaking the barrier, so that the others
    stop waiting). A read that finds no value of the data set's size
    is a failure.
    """
    try:
        db = contender.open(path)
        for _key, _value in operations:  # their pages copied on write here, not timed
            pass
        barrier.wait(BARRIER_SECONDS)
        start = perf_counter()
        wrong = 0
        for key, value in operations:
            if value is None:
                wrong += len(contender.get(db, key) or b"") != VALUE_SIZE
            else:
                contender.put(db, key, value)
        end = perf_counter()
        contender.close(db)
        results.put((start, end, "%d reads found no value" % wrong if wrong else None))
    except Exception as error:  # reported to the parent, which stops the run
        barrier.abort()
        results.put((None, None, "%s: %s" % (type(error).__name__, error)))


def time_processes(contender, path, plan):
    """Run ``plan`` in ``PROCESSES`` forked processes; return seconds from first start to last end.

    perf_counter is the system's monotonic clock, the same in every
    process. Exits with an error if a process failed or died.
    """
    barrier = FORK.Barrier(PROCESSES)
    results = FORK.Queue()
    children = [
        FORK.Process(target=run_share, args=(contender, path, work, barrier, results))
        for work in plan.operations
    ]
    for child in children:
        child.start()
    answers = [collect(results, children) for _ in children]
    for child in children:
        child.join()
    # A process that fails breaks the barrier for the others: its own error comes first.
    errors = sorted(
        (error for _, _, error in answers if error),
        key=lambda error: error.startswith("BrokenBarrierError"),
    )
    if errors:
        sys.exit("a process of the workload failed: %s" % errors[0])
    return max(end for _, end, _ in answers) - min(start for start, _, _ in answers)


def collect(results, children):
    """Return the next answer on ``results``; exit if a child died without giving one."""
    while True:
        try:
            return results.get(timeout=1)
        except queue.Empty:
            dead = [child.exitcode for child in children if child.exitcode not in (None, 0)]
            if dead:
                sys.exit("a process of the workload died (exit status %d)" % dead[0])


def check_store(contender, path, expected):
    """Exit with an error unless the store at ``path`` holds exactly ``expected``."""
    db = contender.open(path)
    length = contender.length(db)
    wrong = [key for key, value in expected.items() if contender.get(db, key) != value]
    contender.close(db)
    if length != len(expected):
        sys.exit("the store has %d keys, expected %d" % (length, len(expected)))
    if wrong:
        sys.exit("%d keys hold the wrong value, the first %r" % (len(wrong), wrong[0]))


def run_shared(contender, name, directory, seed, sizes):
    """Time the fill and the mixed workload on ``contender``; return ops/s and notes."""
    divisor = PROCESS_SLOW.get(name, 1)
    keys, values, _ = make_data(
        max(PROCESSES, sizes["fill"] // divisor), KEY_SIZE, VALUE_SIZE, seed
    )
    per_process = max(1, sizes["mixed"] // divisor)
    path = os.path.join(directory, "shared")
    # Made here, so that the four processes open a store that exists.
    contender.close(contender.open(path))
    ops = {}
    fill = fill_plan(keys, values)
    ops["fill_4_writers"] = len(keys) / time_processes(contender, path, fill)
    check_store(contender, path, fill.expected)
    mixed = mixed_plan(keys, values, per_process, seed)
    ops["mixed_4_processes"] = PROCESSES * per_process / time_processes(contender, path, mixed)
    check_store(contender, path, mixed.expected)
    notes = [contender.note] if hasattr(contender, "note") else []
    if divisor > 1:
        notes.append(
            "slow: filled %s keys, %s operations per process in the mixed workload"
            % ("{:,}".format(len(keys)), "{:,}".format(per_process))
        )
    return {"keys": len(keys), "ops_per_sec": ops, "notes": notes}


def time_alone(semidbm, path, flag, pairs, way):
    """Write ``pairs`` into a new database at ``path`` opened with ``flag``; return ops/s.

    ``way`` is "single" (``db[key] = value`` each) or "update"
    (``update()`` of ``UPDATE_ITEMS`` at a time). Closing is not timed.
    """
    chunks = [pairs[i : i + UPDATE_ITEMS] for i in range(0, len(pairs), UPDATE_ITEMS)]
    db = semidbm.open(path, flag)
    start = perf_counter()
    if way == "single":
        for key, value in pairs:
            db[key] = value
    else:
        for chunk in chunks:  # sliced before the clock starts
            db.update(chunk)
    seconds = perf_counter() - start
    db.close()
    return len(pairs) / seconds


def run_alone(contender, directory, seed, count):
    """A writer alone, shared and exclusive, single puts and updates: the median ops/s of each.

    Exclusive and shared take turns for ``ALONE_ROUNDS`` rounds, each
    into a new database, so that neither has the warm machine to itself.
    """
    keys, values, _ = make_data(count, KEY_SIZE, VALUE_SIZE, seed)
    pairs = list(zip(keys, values))
    rates = {}
    for way in ("single", "update"):
        rounds = {"exclusive": [], "shared": []}
        for number in range(ALONE_ROUNDS):
            for mode, flag in (("exclusive", "n"), ("shared", contender.flag)):
                path = os.path.join(directory, "alone-%s-%s-%d" % (way, mode, number))
                rounds[mode].append(time_alone(contender.module, path, flag, pairs, way))
        rates[way] = {mode: statistics.median(found) for mode, found in rounds.items()}
    return rates


#: The pool's data in this process and the workers it forks: keys, values, order of reads.
POOL_DATA = {}


def touch_pool_data():
    """Touch every key and number of the order, so that copying them on write is not timed.

    A forked process shares its parent's pages until either writes one,
    and reading a key through Python writes its reference count: the
    first touch of each page copies it, which belongs to the benchmark's
    data, not to the database read.
    """
    keys = POOL_DATA["keys"]
    for number in POOL_DATA["order"]:
        keys[number]


def wait_for_all():
    """A pool worker's first task: touch the data, then wait until every worker has started."""
    touch_pool_data()
    POOL_DATA["barrier"].wait(BARRIER_SECONDS)


def read_half(handle, start, stop):
    """In a pool worker: unpickle ``handle``, read keys ``start:stop`` of the order; return seconds.

    Returns ``(open seconds, wrong values)``: the open is
    ``pickle.loads`` and the first read.
    """
    keys, values, order = POOL_DATA["keys"], POOL_DATA["values"], POOL_DATA["order"]
    began = perf_counter()
    db = pickle.loads(handle)
    db[keys[order[start]]]
    opened = perf_counter() - began
    for number in order[start:stop]:
        db[keys[number]]
    sample = order[start : start + SAMPLE_SIZE]
    wrong = sum(db[keys[number]] != values[number] for number in sample)
    db.close()
    return opened, wrong


def read_alone(semidbm, path):
    """Open the database read-only here and read every key in the order; return the seconds."""
    keys, order = POOL_DATA["keys"], POOL_DATA["order"]
    start = perf_counter()
    db = semidbm.open(path, "r")
    for number in order:
        db[keys[number]]
    seconds = perf_counter() - start
    db.close()
    return seconds


def read_in_pool(pool, semidbm, path):
    """Send a pickled read-only handle to each pool worker with its half; return seconds, opens."""
    count = len(POOL_DATA["order"])
    bounds = [count * w // POOL_WORKERS for w in range(POOL_WORKERS + 1)]
    db = semidbm.open(path, "r")
    start = perf_counter()
    handle = pickle.dumps(db)
    futures = [
        pool.submit(read_half, handle, bounds[w], bounds[w + 1]) for w in range(POOL_WORKERS)
    ]
    answers = [future.result() for future in futures]
    seconds = perf_counter() - start
    db.close()
    if any(wrong for _, wrong in answers):
        sys.exit("a pool worker read wrong values")
    return seconds, [opened for opened, _ in answers]


def run_pool(contender, directory, seed, count):
    """The pool against one process, over a database of ``count`` keys: ops/s and open seconds."""
    keys, values, rng = make_data(count, KEY_SIZE, VALUE_SIZE, seed)
    path = os.path.join(directory, "pool")
    with contender.module.open(path, "n") as db:
        db.update(zip(keys, values))
    order = shuffled(range(count), rng)
    POOL_DATA.update(keys=keys, values=values, order=order, barrier=FORK.Barrier(POOL_WORKERS))
    with concurrent.futures.ProcessPoolExecutor(POOL_WORKERS, mp_context=FORK) as pool:
        for future in [pool.submit(wait_for_all) for _ in range(POOL_WORKERS)]:
            future.result()
        touch_pool_data()
        one = read_alone(contender.module, path)
        seconds, opens = read_in_pool(pool, contender.module, path)
    return {
        "one_process": count / one,
        "workers": count / seconds,
        "open_seconds": opens,
    }


def run(name, directory, seed, quick):
    """Run contender ``name``; return its JSON result (with ``cannot`` or ``missing`` if so)."""
    if name in LOCKLESS:
        return {"contender": name, "cannot": LOCKLESS[name]}
    sizes = PROCESS_SIZES[quick]
    try:
        if name in REFUSING:
            refusal = second_writer_refusal(REFUSING[name], os.path.join(directory, "probe"))
            if refusal is None:
                sys.exit(
                    "%s let a second process open it for writing: it needs a driver here" % name
                )
            return {"contender": name, "cannot": "a second writer process is refused: %s" % refusal}
        contender = CONTENDERS[name](sizes["fill"])
    except ImportError as exc:
        return {"contender": name, "missing": str(exc)}
    result = describe(name, contender)
    result.update(run_shared(contender, name, directory, seed, sizes))
    if isinstance(contender, SharedSemidbm):
        result["alone"] = run_alone(contender, directory, seed, sizes["alone"])
        result["pool"] = run_pool(contender, directory, seed, sizes["pool"])
    return result


def main():
    parser = argparse.ArgumentParser(description="Time several processes on one store.")
    parser.add_argument(
        "contender", choices=sorted(set(CONTENDERS) | set(REFUSING) | set(LOCKLESS))
    )
    parser.add_argument("--preset", choices=["e"], required=True)
    parser.add_argument("--dir", required=True, help="an empty directory for the stores")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke test")
    args = parser.parse_args()
    print(json.dumps(run(args.contender, args.dir, args.seed, args.quick)))


if __name__ == "__main__":
    main()
