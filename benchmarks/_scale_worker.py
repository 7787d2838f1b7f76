"""One phase of the scale benchmark, in this fresh process (run by ``scale.py``).

::

    python benchmarks/_scale_worker.py load CONTENDER --records N --path P [--seconds S]
    python benchmarks/_scale_worker.py reopen --records N --path P --reads R --seed S [--cold]
    python benchmarks/_scale_worker.py compact --records N --path P

``load`` fills a new db of CONTENDER (``semidbm`` or ``dbm.gnu``) with
the keys 0 to N-1 (as ASCII decimal bytes) and their American English
words as values (``number_words``). The data is made in chunks of
2**16 records, outside the timed part; each chunk is then set in
a plain ``db[key] = value`` loop, which is what is timed. At 2**17
records and every doubling after, and at N, it notes the load time so
far, the records per second within that doubling (per second of wall
time, and per second of this process's CPU time, which other work on a
shared machine disturbs less), the process's
anonymous resident memory above what it held with the empty db open,
and the size of the data file. Then it times ``close()`` (a flush and
fsync for semidbm). With ``--seconds``, loading stops once that much
load time has passed (checked after each chunk) and the partial
doubling is noted as such.

``reopen --cold`` only drops the data file from the page cache
(``posix_fadvise(DONTNEED)``: its own pages only, all clean after the
load's fsync) and times a reopen that reads it from the disk. Without
it, ``reopen`` makes R random keys (seeded), takes the anonymous resident
memory as its baseline, then times ``semidbm.open(P, "r")``, ``len()``
and one lookup (the index is rebuilt on open, eagerly), reads the
memory again, times reading the R keys in a plain loop, and checks the
length and a sample of values against ``number_words``.

``compact`` opens the db for writing (timed: the index is rebuilt),
then times ``compact()`` with a progress callback that samples the
anonymous resident memory at every call, to show that the copy streams
in bounded memory; then checks the length and a sample of values.

Each prints one JSON object on stdout; progress goes to stderr.
"""

import argparse
import gc
import json
import os
import random
import sys
from time import perf_counter, process_time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from number_words import number_words, words_block  # noqa: E402

#: The first doubling reported.
FIRST_MARK = 1 << 17
#: Records made (and held in memory) at once: few enough (about 10 MB of
#: objects) that every chunk is read from the CPU's cache alike, whatever
#: the doubling, and that the time limit is checked often.
CHUNK = 1 << 16
#: Values checked after a reopen.
SAMPLE_SIZE = 1000


def anonymous_memory(collect=True):
    """Return this process's anonymous resident memory in bytes (RssAnon), after a collection."""
    if collect:
        gc.collect()
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    sys.exit("no RssAnon in /proc/self/status (the scale benchmark needs Linux)")


def marks(count):
    """The record counts reported: 2**17, 2**18, ... below ``count``, then ``count``."""
    mark = FIRST_MARK
    while mark < count:
        yield mark
        mark *= 2
    yield count


def open_new(contender, path):
    """Create an empty db of ``contender`` at ``path``; return it and its data file's path."""
    if contender == "semidbm":
        import semidbm

        if semidbm.implementation != "cython":
            sys.exit("semidbm runs on its %s kernel, not the compiled one" % semidbm.implementation)
        return semidbm.open(path, "n"), os.path.join(path, "data")
    import dbm.gnu

    return dbm.gnu.open(path, "n"), path


def load(contender, count, path, seconds_limit):
    """Fill a new db with ``count`` records; return the rows and the close time (see above)."""
    db, data_path = open_new(contender, path)
    baseline = anonymous_memory()
    rows = []
    done = 0
    elapsed = 0.0
    cpu = 0.0
    stopped = False
    for mark in marks(count):
        start_records, start_seconds, start_cpu = done, elapsed, cpu
        while done < mark and not stopped:
            stop = min(mark, done + CHUNK)
            keys = [b"%d" % number for number in range(done, stop)]
            values = words_block(done, stop)
            pairs = zip(keys, values)
            began, began_cpu = perf_counter(), process_time()
            for key, value in pairs:
                db[key] = value
            elapsed += perf_counter() - began
            cpu += process_time() - began_cpu
            done = stop
            del keys, values, pairs
            stopped = bool(seconds_limit) and elapsed >= seconds_limit
        rows.append(
            {
                "mark": mark,
                "records": done,
                "seconds": elapsed,
                "rate": (done - start_records) / max(elapsed - start_seconds, 1e-9),
                "cpu_rate": (done - start_records) / max(cpu - start_cpu, 1e-9),
                "anonymous_bytes": anonymous_memory() - baseline,
                "file_bytes": os.stat(data_path).st_size,
                "partial": done < mark,
            }
        )
        print(
            "%s: %d records, %.2f s, %.0f records/s" % (contender, done, elapsed, rows[-1]["rate"]),
            file=sys.stderr,
            flush=True,
        )
        if stopped:
            break
    began = perf_counter()
    db.close()
    close_seconds = perf_counter() - began
    return {"rows": rows, "close_seconds": close_seconds, "file_bytes": os.stat(data_path).st_size}


def timed_reopen(path, last):
    """Open the semidbm db at ``path`` read-only, take its length and look up ``last``.

    Returns the db, its length, the value and the seconds taken.
    """
    import semidbm

    began = perf_counter()
    db = semidbm.open(path, "r")
    length = len(db)
    value = db[last]
    return db, length, value, perf_counter() - began


def drop_from_page_cache(path):
    """Ask the kernel to forget the cached pages of the file ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def reopen(count, path, reads, seed, cold):
    """Time the reopen and random reads of a filled semidbm db (see above)."""
    import semidbm

    last = b"%d" % (count - 1)
    if cold:
        drop_from_page_cache(os.path.join(path, "data"))
        db, length, _, seconds = timed_reopen(path, last)
        db.close()
        if length != count:
            sys.exit("the reopened db has %d keys, expected %d" % (length, count))
        return {"seconds": seconds}
    rng = random.Random(seed)
    numbers = [rng.randrange(count) for _ in range(reads)]
    keys = [b"%d" % number for number in numbers]
    baseline = anonymous_memory()
    db, length, value, seconds = timed_reopen(path, last)
    index_bytes = anonymous_memory() - baseline
    began = perf_counter()
    for key in keys:
        db[key]
    read_seconds = perf_counter() - began
    if length != count:
        sys.exit("the reopened db has %d keys, expected %d" % (length, count))
    if value != number_words(count - 1).encode("ascii"):
        sys.exit("wrong value for key %r" % last)
    check_sample(db, numbers[:SAMPLE_SIZE])
    db.close()
    return {
        "seconds": seconds,
        "count": length,
        "index_bytes": index_bytes,
        "reads": reads,
        "reads_per_second": reads / read_seconds,
        "implementation": semidbm.implementation,
    }


def check_sample(db, numbers):
    """Exit with an error unless ``db`` holds the words of each of ``numbers``."""
    for number in numbers:
        if db[b"%d" % number] != number_words(number).encode("ascii"):
            sys.exit("wrong value for key %d" % number)


def compact(count, path):
    """Time a writer's open and its compaction of a filled semidbm db (see above)."""
    import semidbm

    data_path = os.path.join(path, "data")
    size_before = os.stat(data_path).st_size
    began = perf_counter()
    db = semidbm.open(path, "w")
    open_seconds = perf_counter() - began
    baseline = anonymous_memory()
    peak = baseline
    calls = 0

    def progress(done, total):
        nonlocal peak, calls
        calls += 1
        peak = max(peak, anonymous_memory(collect=False))
        if calls % 1000 == 0:
            print("compact: %.1f%%" % (100 * done / total), file=sys.stderr, flush=True)

    began = perf_counter()
    db.compact(progress=progress)
    seconds = perf_counter() - began
    if len(db) != count:
        sys.exit("the compacted db has %d keys, expected %d" % (len(db), count))
    check_sample(db, random.Random(1).sample(range(count), min(count, SAMPLE_SIZE)))
    db.close()
    return {
        "open_seconds": open_seconds,
        "seconds": seconds,
        "progress_calls": calls,
        "peak_copy_bytes": peak - baseline,
        "file_bytes_before": size_before,
        "file_bytes_after": os.stat(data_path).st_size,
    }


def main():
    parser = argparse.ArgumentParser(description="One phase of the scale benchmark.")
    parser.add_argument("phase", choices=["load", "reopen", "compact"])
    parser.add_argument("contender", nargs="?", choices=["semidbm", "dbm.gnu"])
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--seconds", type=float, default=0, help="load time limit (0: none)")
    parser.add_argument("--reads", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold", action="store_true", help="also reopen from the disk first")
    args = parser.parse_args()
    if args.phase == "load":
        if args.contender is None:
            parser.error("load needs a contender")
        result = load(args.contender, args.records, args.path, args.seconds)
    elif args.phase == "reopen":
        result = reopen(args.records, args.path, args.reads, args.seed, args.cold)
    else:
        result = compact(args.records, args.path)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
