"""One phase of the scale benchmark, in this fresh process (run by ``scale.py``).

::

    python benchmarks/_scale_worker.py load CONTENDER --records N --path P [--seconds S]
    python benchmarks/_scale_worker.py open --records N --path P --mode r|w --seed S [--cold]
    python benchmarks/_scale_worker.py read --records N --path P --reads R --seed S [--go-fd FD]
    python benchmarks/_scale_worker.py write --records N --path P --seed S
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
and the size of the data file. Then it times ``close()`` (for semidbm a
flush and fsync, and the writing of the index file), and gives the
index file's size (none if the kernel wrote none). With ``--seconds``,
loading stops once that much load time has passed (checked after each
chunk) and the partial doubling is noted as such.

``open`` times what a program does first with a filled semidbm db:
``semidbm.open(P, MODE)``, ``len()`` and one lookup (of a key drawn
with the seed), and reads how much the anonymous memory grew with it
("Anonymous:" of ``/proc/self/smaps_rollup``: the private memory the
open took, leaving out the pages of a mapped index, which the page cache
holds and every process shares). With ``--cold``, every file of the db
(``data`` and ``index``) is first dropped from the page cache
(``_pagecache``), and how much of each the cache held is read before
the open and after it (what the open read from the disk).

``read`` is one reader's random reads: it draws R keys with the seed and
makes the words expected for each, then times ``open(P, "r")``, ``len()``
and a first lookup, and then the R reads in a plain loop that compares
every answer with the expected words (an error if any differs). With
``--go-fd``, it prints ``ready`` once the keys are made and waits until
the file descriptor FD reads as ended before it opens the db: the
parent starts several readers at the same moment that way. It notes
the time (``CLOCK_MONOTONIC``, shared by all processes) when its reads
begin and after every 4,096 of them, so that the parent can tell how
they overlapped and how many each did while all were reading.

``write`` times ``open(P, "w")``, one set and ``close()``: a key drawn with
the seed is set to its own words again, so the data set stays the same
(one dead record more). It notes whether the close wrote a new index
file (the index's inode changed) and checks that the data file grew by
exactly the one record.

``compact`` opens the db for writing (timed),
then times ``compact()`` with a progress callback that samples the
anonymous resident memory at every call, to show that the copy streams
in bounded memory; then checks the length and a sample of values, and
gives the index file's size after.

Each prints one JSON object on stdout (after ``ready`` with ``--go-fd``);
progress goes to stderr.
"""

import argparse
import gc
import json
import os
import random
import sys
import time
from time import perf_counter, process_time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _pagecache  # noqa: E402
from _number_words import number_words, words_block  # noqa: E402

#: The first doubling reported.
FIRST_MARK = 1 << 17
#: Records made (and held in memory) at once: few enough (about 10 MB of
#: objects) that every chunk is read from the CPU's cache alike, whatever
#: the doubling, and that the time limit is checked often.
CHUNK = 1 << 16
#: Values checked after a compaction.
SAMPLE_SIZE = 1000
#: Reads between two notes of the time in a reader (a few milliseconds): the
#: parent interpolates between the notes to tell how many reads each reader
#: did while all were reading. A clock call per 4,096 reads costs nothing
#: that shows.
READ_CHUNK = 1 << 12
#: The bytes of a put record beside its key and value: two lengths and a CRC (docs/FORMAT.md).
RECORD_OVERHEAD = 12


def anonymous_memory(collect=True):
    """Return this process's anonymous resident memory in bytes (RssAnon), after a collection."""
    if collect:
        gc.collect()
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    sys.exit("no RssAnon in /proc/self/status (the scale benchmark needs Linux)")


def mapped_memory():
    """Return this process's "Anonymous" and "Rss" bytes from smaps_rollup, after a collection.

    "Anonymous" is the private memory (a rebuilt index, or a table of the
    log past the index); "Rss" adds the file pages mapped and resident,
    such as those of a mapped index file.
    """
    gc.collect()
    found = {}
    try:
        with open("/proc/self/smaps_rollup") as rollup:
            for line in rollup:
                name, _, rest = line.partition(":")
                if name in ("Anonymous", "Rss"):
                    found[name] = int(rest.split()[0]) * 1024
    except OSError:
        pass
    if len(found) != 2:
        sys.exit("no Anonymous and Rss in /proc/self/smaps_rollup (Linux 4.14 or later needed)")
    return found["Anonymous"], found["Rss"]


def marks(count):
    """The record counts reported: 2**17, 2**18, ... below ``count``, then ``count``."""
    mark = FIRST_MARK
    while mark < count:
        yield mark
        mark *= 2
    yield count


def index_size(path):
    """Return the size of the semidbm db's index file, or None if it has none."""
    try:
        return os.stat(os.path.join(path, "index")).st_size
    except FileNotFoundError:
        return None


def cache_state(path):
    """Return [bytes in the page cache, size] of the db's ``data`` and ``index`` (None: no file)."""
    state = _pagecache.cache_state(path)
    return {name: state.get(name) for name in ("data", "index")}


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
    return {
        "rows": rows,
        "close_seconds": close_seconds,
        "file_bytes": os.stat(data_path).st_size,
        "index_bytes": index_size(path) if contender == "semidbm" else None,
    }


def expect(condition, message):
    """Exit with ``message`` unless ``condition`` holds: a wrong answer fails the benchmark."""
    if not condition:
        sys.exit(message)


def open_db(count, path, mode, seed, cold):
    """Time a fresh process's open, ``len()`` and first lookup of the db (see above)."""
    import semidbm

    number = random.Random(seed).randrange(count)
    key = b"%d" % number
    before = None
    if cold:
        _pagecache.drop(path)
        before = cache_state(path)
    baseline, baseline_rss = mapped_memory()
    began = perf_counter()
    db = semidbm.open(path, mode)
    length = len(db)
    value = db[key]
    seconds = perf_counter() - began
    anonymous, rss = mapped_memory()
    after = cache_state(path) if cold else None
    db.close()
    expect(length == count, "the reopened db has %d keys, expected %d" % (length, count))
    expect(value == number_words(number).encode("ascii"), "wrong value for key %r" % key)
    return {
        "mode": mode,
        "seconds": seconds,
        "anonymous_bytes": anonymous - baseline,
        "rss_bytes": rss - baseline_rss,
        "cache_before": before,
        "cache_after": after,
        "implementation": semidbm.implementation,
    }


def read(count, path, reads, seed, go_fd):
    """One reader's timed open and ``reads`` random reads, every answer checked (see above)."""
    import semidbm

    rng = random.Random(seed)
    numbers = [rng.randrange(count) for _ in range(reads)]
    keys = [b"%d" % number for number in numbers]
    expected = [number_words(number).encode("ascii") for number in numbers]
    chunks = [
        (keys[start : start + READ_CHUNK], expected[start : start + READ_CHUNK])
        for start in range(0, reads, READ_CHUNK)
    ]
    del numbers
    # Collected now, the objects made above set off no collection inside the timed open
    # (one that did took 6 ms where the open takes 0.3).
    gc.collect()
    if go_fd is not None:
        print("ready", flush=True)
        os.read(go_fd, 1)  # returns once the parent has closed its end of the pipe
        os.close(go_fd)
    began = perf_counter()
    db = semidbm.open(path, "r")
    length = len(db)
    first = db[keys[0]]
    open_seconds = perf_counter() - began
    opened, _ = mapped_memory()  # a reader's own memory is measured by ``open``
    wrong = 0
    done = 0
    stamps = [[time.clock_gettime(time.CLOCK_MONOTONIC), 0]]
    began, began_cpu = perf_counter(), process_time()
    for chunk_keys, chunk_expected in chunks:
        for key, value in zip(chunk_keys, chunk_expected):
            if db[key] != value:
                wrong += 1
        done += len(chunk_keys)
        stamps.append([time.clock_gettime(time.CLOCK_MONOTONIC), done])
    seconds, cpu = perf_counter() - began, process_time() - began_cpu
    read_memory, _ = mapped_memory()
    db.close()
    expect(length == count, "the reopened db has %d keys, expected %d" % (length, count))
    expect(first == expected[0], "wrong value for key %r" % keys[0])
    expect(not wrong, "%d of %d random reads gave a wrong value" % (wrong, reads))
    return {
        "open_seconds": open_seconds,
        "reads": reads,
        "seconds": seconds,
        "reads_per_second": reads / seconds,
        "reads_per_cpu_second": reads / max(cpu, 1e-9),
        "stamps": stamps,
        "read_anonymous_bytes": read_memory - opened,
        "anonymous_total": read_memory,
    }


def write(count, path, seed):
    """Time a fresh process's ``open(P, "w")``, one set and ``close()`` (see above)."""
    import semidbm

    number = random.Random(seed).randrange(count)
    key = b"%d" % number
    value = number_words(number).encode("ascii")
    data_path = os.path.join(path, "data")
    index_path = os.path.join(path, "index")
    index_before = os.stat(index_path).st_ino if os.path.exists(index_path) else None
    size_before = os.stat(data_path).st_size
    began = perf_counter()
    db = semidbm.open(path, "w")
    db[key] = value
    db.close()
    seconds = perf_counter() - began
    index_after = os.stat(index_path).st_ino if os.path.exists(index_path) else None
    appended = os.stat(data_path).st_size - size_before
    record = RECORD_OVERHEAD + len(key) + len(value)
    expect(appended == record, "the set appended %d bytes, not a record of %d" % (appended, record))
    return {
        "seconds": seconds,
        "index_rewritten": index_after is not None and index_after != index_before,
    }


def check_sample(db, numbers):
    """Exit with an error unless ``db`` holds the words of each of ``numbers``."""
    for number in numbers:
        expect(
            db[b"%d" % number] == number_words(number).encode("ascii"),
            "wrong value for key %d" % number,
        )


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
    expect(len(db) == count, "the compacted db has %d keys, expected %d" % (len(db), count))
    check_sample(db, random.Random(1).sample(range(count), min(count, SAMPLE_SIZE)))
    db.close()
    return {
        "open_seconds": open_seconds,
        "seconds": seconds,
        "progress_calls": calls,
        "peak_copy_bytes": peak - baseline,
        "file_bytes_before": size_before,
        "file_bytes_after": os.stat(data_path).st_size,
        "index_bytes_after": index_size(path),
    }


def main():
    parser = argparse.ArgumentParser(description="One phase of the scale benchmark.")
    parser.add_argument("phase", choices=["load", "open", "read", "write", "compact"])
    parser.add_argument("contender", nargs="?", choices=["semidbm", "dbm.gnu"])
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--seconds", type=float, default=0, help="load time limit (0: none)")
    parser.add_argument("--mode", choices=["r", "w"], default="r", help="open's mode")
    parser.add_argument("--reads", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cold", action="store_true", help="open with the db out of the cache")
    parser.add_argument("--go-fd", type=int, help="read: wait for this descriptor to end")
    args = parser.parse_args()
    if args.phase == "load":
        if args.contender is None:
            parser.error("load needs a contender")
        result = load(args.contender, args.records, args.path, args.seconds)
    elif args.phase == "open":
        result = open_db(args.records, args.path, args.mode, args.seed, args.cold)
    elif args.phase == "read":
        result = read(args.records, args.path, args.reads, args.seed, args.go_fd)
    elif args.phase == "write":
        result = write(args.records, args.path, args.seed)
    else:
        result = compact(args.records, args.path)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
