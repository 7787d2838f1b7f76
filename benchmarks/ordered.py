"""Keys in order (``db.iter_sorted``) on the compiled kernel, against LMDB's cursor.

Usage (``.venv`` is made by ``bash scripts/nox.sh -s dev``; LMDB is the
``bench`` extra's ``lmdb``)::

    .venv/bin/python benchmarks/ordered.py [--keys N] [--repeat R] [--quick] [--out-dir DIR]

One database of ``--keys`` keys (16 bytes, ``k`` and the number with
zeros in front, written in a shuffled order, so that the log's order is
not the keys') and values of 100 bytes; the same items in an LMDB
environment. Then, each repetition:

- prefix, fresh open: open the database (its index file written at the
  fill's close), then the first 1,000 keys of a prefix that 1,000 keys
  start with (``islice(db.iter_sorted(prefix=P), 1000)``): the open and
  the keys timed apart;
- range: the items of a range of 100,000 keys (fewer at small sizes),
  ``list(db.iter_sorted(start, stop, what="items"))``, against LMDB's
  cursor from ``set_range(start)`` to ``stop`` in a read transaction,
  each making the same list of pairs;
- full keys and full items: every key (then every item) in order,
  against every key by iteration over ``db`` (``list(db)``), and every
  item as ``db.items()`` gives them (both unordered).

Each ratio is the median of the per-repetition ratios of the two times
(which goes first alternates); the times are medians too. The report,
a Markdown table with the targets of issue 33, goes to standard output
and to ``report.md`` in the results directory (``results/ordered/`` and
the run's date, or ``--out-dir``). The databases are made in a
temporary directory (``--dir``), removed at the end.
"""

import argparse
import itertools
import os
import random
import statistics
import sys
import tempfile
from time import perf_counter

from _report import markdown_table
from _results import results_directory

import semidbm

#: Keys a prefix of the prefix measurement has, and that it reads.
PREFIX_KEYS = 1000
#: Keys of the range measurement (fewer if the database has not four times as many).
RANGE_KEYS = 100_000
#: Bytes of each value.
VALUE_SIZE = 100
#: Keys by default, and with ``--quick``.
DEFAULT_KEYS = 1_000_000
QUICK_KEYS = 20_000
#: Issue 33's targets: the prefix's first keys after a fresh open (ms, at 10,000,000 keys), the
#: range's speed against LMDB's cursor, and full ordered iteration's against unordered.
PREFIX_TARGET_MS = 1.0
RANGE_TARGET = 1.0
FULL_TARGET = 0.5


def key_of(number):
    """The key of ``number``: 16 bytes, ``k`` and the number with zeros in front."""
    return b"k%015d" % number


def value_of(number):
    """A value of ``VALUE_SIZE`` bytes that names its key's number."""
    return (b"%d:" % number).ljust(VALUE_SIZE, b"v")


def fill(place, count, seed):
    """Write ``count`` items, shuffled, into a semidbm database and an LMDB environment there."""
    import lmdb

    numbers = list(range(count))
    random.Random(seed).shuffle(numbers)
    path = os.path.join(place, "semidbm")
    chunk = 100_000
    with semidbm.open(path, "n") as db:
        for start in range(0, count, chunk):
            db.update({key_of(n): value_of(n) for n in numbers[start : start + chunk]})
    env = lmdb.open(os.path.join(place, "lmdb"), map_size=count * 2048 + (256 << 20),
                    sync=False, metasync=False)
    for start in range(0, count, chunk):
        with env.begin(write=True) as txn:
            for n in numbers[start : start + chunk]:
                txn.put(key_of(n), value_of(n))
    env.sync(True)
    return path, env


def bounds(count):
    """The prefix (``PREFIX_KEYS`` keys start with it), and the range's start and stop."""
    middle = count // 2 - count // 2 % PREFIX_KEYS
    prefix = key_of(middle)[: -len(str(PREFIX_KEYS - 1))]
    size = min(RANGE_KEYS, count // 4)
    return prefix, key_of(count // 4), key_of(count // 4 + size)


def timed(work):
    """``(seconds, result)`` of ``work()``."""
    started = perf_counter()
    result = work()
    return perf_counter() - started, result


def lmdb_range(env, start, stop):
    """The items from ``start`` up to ``stop``, by an LMDB cursor in a read transaction."""
    pairs = []
    with env.begin(buffers=False) as txn:
        cursor = txn.cursor()
        if cursor.set_range(start):
            for key, value in cursor:
                if key >= stop:
                    break
                pairs.append((key, value))
    return pairs


def repetition(path, env, count, turn):
    """One repetition: ``{measurement: seconds or (semidbm seconds, other seconds)}``."""
    prefix, start, stop = bounds(count)
    results = {}
    opened, db = timed(lambda: semidbm.open(path, "r"))
    with db:
        first, keys = timed(lambda: list(itertools.islice(db.iter_sorted(prefix=prefix),
                                                          PREFIX_KEYS)))
        if len(keys) != PREFIX_KEYS or not all(key.startswith(prefix) for key in keys):
            sys.exit("the prefix's keys are wrong: %d of them" % len(keys))
        results["open"] = opened
        results["prefix"] = first
        ways = {
            "range": (lambda: list(db.iter_sorted(start, stop, what="items")),
                      lambda: lmdb_range(env, start, stop)),
            "full keys": (lambda: list(db.iter_sorted()), lambda: list(db)),
            "full items": (lambda: list(db.iter_sorted(what="items")), db.items),
        }
        for name, (ours, other) in ways.items():
            if turn % 2:
                other_time, theirs = timed(other)
                our_time, got = timed(ours)
            else:
                our_time, got = timed(ours)
                other_time, theirs = timed(other)
            if sorted(theirs) != got:
                sys.exit("%s: the ordered result differs from the other's" % name)
            results[name] = (our_time, other_time)
    return results


def summary(runs):
    """Per measurement: median seconds, or (ours, other's, median ratio other / ours)."""
    rows = {}
    for name in runs[0]:
        times = [run[name] for run in runs]
        if isinstance(times[0], tuple):
            rows[name] = (
                statistics.median(ours for ours, _ in times),
                statistics.median(other for _, other in times),
                statistics.median(other / ours for ours, other in times),
            )
        else:
            rows[name] = statistics.median(times)
    return rows


def verdict(met):
    return "met" if met else "MISSED"


#: The compared measurements, as the report names them (``%d``: the range's keys).
COMPARED = {
    "range": "range of %d items vs LMDB cursor",
    "full keys": "every key in order vs list(db)",
    "full items": "every item in order vs db.items()",
}


def report(rows, count, repeat, index_bytes, data_bytes, command):
    """The report: what ran, a table of the times and ratios, and each target met or missed."""
    range_keys = min(RANGE_KEYS, count // 4)
    table = [
        [(label % range_keys) if "%d" in label else label,
         "%.2f" % (rows[name][0] * 1000), "%.2f" % (rows[name][1] * 1000),
         "%.2fx" % rows[name][2]]
        for name, label in COMPARED.items()
    ]
    return "\n".join([
        "Keys in order, compiled kernel; %d keys of 16 bytes, values of %d bytes, written "
        "shuffled; %d repetitions (medians)." % (count, VALUE_SIZE, repeat),
        "Command: `%s`" % command,
        "",
        "- open (read-only): %.2f ms; first %d keys of a prefix after it: %.2f ms"
        % (rows["open"] * 1000, PREFIX_KEYS, rows["prefix"] * 1000),
        "",
        markdown_table(
            ["measurement", "semidbm, ms", "other, ms", "other time / semidbm time"], table
        ),
        "",
        "- index file: %d bytes, %.2f a key (data file: %d bytes); unchanged by this "
        "feature (no order is kept in it)" % (index_bytes, index_bytes / count, data_bytes),
        "- prefix target (under %.1f ms at 10,000,000 keys): %s at %d keys"
        % (PREFIX_TARGET_MS, verdict(rows["prefix"] * 1000 < PREFIX_TARGET_MS), count),
        "- range target (at least %.1fx LMDB's cursor): %s"
        % (RANGE_TARGET, verdict(rows["range"][2] >= RANGE_TARGET)),
        "- full iteration target (at least %.1fx unordered): keys %s, items %s"
        % (FULL_TARGET, verdict(rows["full keys"][2] >= FULL_TARGET),
           verdict(rows["full items"][2] >= FULL_TARGET)),
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, help="keys (%d; %d with --quick)"
                        % (DEFAULT_KEYS, QUICK_KEYS))
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (3)")
    parser.add_argument("--quick", action="store_true", help="a small database")
    parser.add_argument("--out-dir", help="where the report goes (default: a new directory "
                        "under results/ordered/)")
    parser.add_argument("--dir", help="where to make the databases (default: the system's "
                        "temporary directory)")
    args = parser.parse_args(argv)
    if semidbm.implementation != "cython":
        sys.exit("the compiled kernel is not in use")
    count = args.keys or (QUICK_KEYS if args.quick else DEFAULT_KEYS)
    if count < 4 * PREFIX_KEYS:
        sys.exit("--keys must be at least %d" % (4 * PREFIX_KEYS))
    out_dir = results_directory(args.out_dir, os.path.join("results", "ordered"))
    with tempfile.TemporaryDirectory(dir=args.dir) as place:
        path, env = fill(place, count, 33)
        index = os.path.join(path, "index")
        index_bytes = os.path.getsize(index) if os.path.exists(index) else 0
        data_bytes = os.path.getsize(os.path.join(path, "data"))
        runs = []
        for turn in range(args.repeat):
            runs.append(repetition(path, env, count, turn))
            print("repetition %d/%d done" % (turn + 1, args.repeat), file=sys.stderr)
        env.close()
    command = " ".join(["benchmarks/ordered.py"] + (argv if argv is not None else sys.argv[1:]))
    text = report(summary(runs), count, args.repeat, index_bytes, data_bytes, command)
    print(text)
    with open(os.path.join(out_dir, "report.md"), "w") as out:
        out.write(text + "\n")


if __name__ == "__main__":
    main()
