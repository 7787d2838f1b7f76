"""Measures the causes docs/performance.md gives for the targets preset a misses.

Usage (``.venv`` is made by ``bash scripts/nox.sh -s dev``)::

    .venv/bin/python benchmarks/gaps.py [--keys N] [--repeat R]

- How much of a fill_random pass is ``close()`` (writing the last buffer
  and fsyncing the file), beside the same fill into a dict.
- Deletes in key order and in random order, for semidbm and for LMDB
  (one write transaction, as in ``_worker.py``): LMDB's B-tree favours
  key order, a hash index does not care.

Prints the median of ``--repeat`` runs of each figure.
"""

import argparse
import random
import shutil
import statistics
import tempfile
from time import perf_counter

import lmdb

import semidbm


def fill_random(path, pairs):
    """Seconds to set ``pairs`` in a new semidbm db, and then to close it."""
    db = semidbm.open(path, "n")
    start = perf_counter()
    for key, value in pairs:
        db[key] = value
    middle = perf_counter()
    db.close()
    return middle - start, perf_counter() - middle


def fill_dict(pairs):
    """Seconds to set ``pairs`` in a dict."""
    table = {}
    start = perf_counter()
    for key, value in pairs:
        table[key] = value
    return perf_counter() - start


def semidbm_deletes(path, pairs, order):
    """Deletes per second from a full semidbm db, in ``order``, close included."""
    with semidbm.open(path, "n") as db:
        for key, value in pairs:
            db[key] = value
    db = semidbm.open(path, "w")
    start = perf_counter()
    for key in order:
        del db[key]
    db.close()
    return len(order) / (perf_counter() - start)


def lmdb_deletes(path, pairs, order):
    """Deletes per second from a full LMDB environment, in ``order``, in one transaction."""
    env = lmdb.open(path, map_size=1 << 31)
    with env.begin(write=True) as txn:
        for key, value in pairs:
            txn.put(key, value)
    start = perf_counter()
    with env.begin(write=True) as txn:
        for key in order:
            txn.delete(key)
    env.close()
    return len(order) / (perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(0)
    block = rng.randbytes(1 << 20)
    keys = [b"%016d" % i for i in range(args.keys)]
    pairs = [(key, block[i % 10000 * 100 : i % 10000 * 100 + 100]) for i, key in enumerate(keys)]
    shuffled_pairs = rng.sample(pairs, len(pairs))
    shuffled_keys = rng.sample(keys, len(keys))
    figures = {}
    place = tempfile.mkdtemp(prefix="semidbm-gaps-")
    try:
        for repetition in range(args.repeat):
            path = "%s/%d" % (place, repetition)
            sets, close = fill_random(path + "-fill", shuffled_pairs)
            figures.setdefault("fill_random: sets, s", []).append(sets)
            figures.setdefault("fill_random: close(), s", []).append(close)
            figures.setdefault("fill_random into a dict, s", []).append(fill_dict(shuffled_pairs))
            for name, order in (("key order", keys), ("random order", shuffled_keys)):
                figures.setdefault("semidbm deletes/s, " + name, []).append(
                    semidbm_deletes("%s-semidbm-%s" % (path, name[0]), pairs, order)
                )
                figures.setdefault("lmdb deletes/s, " + name, []).append(
                    lmdb_deletes("%s-lmdb-%s" % (path, name[0]), pairs, order)
                )
    finally:
        shutil.rmtree(place)
    print(
        "semidbm %s (%s kernel), %d keys, median of %d"
        % (semidbm.__version__, semidbm.implementation, args.keys, args.repeat)
    )
    for name, values in figures.items():
        value = statistics.median(values)
        print("  %-36s %14s" % (name, ("{:,.3f}" if value < 1000 else "{:,.0f}").format(value)))


if __name__ == "__main__":
    main()
