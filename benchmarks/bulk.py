"""Times the bulk operations against the loops they replace, and against a dict.

Usage (``.venv`` is made by ``bash scripts/nox.sh -s dev``)::

    .venv/bin/python benchmarks/bulk.py [--keys N] [--repeat R]

The data are preset a's (``_presets.PRESETS``): 1,000,000 keys of 16 bytes and
values of 100 bytes by default, made by ``_worker.make_data``. Three
databases are made in each repetition, one after the other, in a
temporary directory; each is filled one way, opened again and read
another (the open is not timed), opened for writing and emptied another
(the open is not timed), and removed:

- fill: a loop of ``db[key] = value``, ``db.update(dict)`` or
  ``db.update(zip(keys, values))``, in a new database, then ``close()``
  (timed, as in preset a: it writes the last buffer and the index file,
  and fsyncs); ``sets`` is the same fill before its ``close()``;
- read, in key order: ``for key in keys: db[key]`` (preset a's loop,
  which drops each value), ``[db[key] for key in keys]`` (the list that
  ``get_many`` makes) or ``db.get_many(keys)``;
- delete, in key order, then ``close()``: a loop of ``del db[key]`` or
  ``db.delete_many(keys)`` (the third database is removed full).

The databases take turns in the order above, starting one further each
repetition. A dict does each workload too: ``dict.update``, ``[d[key]
for key in keys]``, a loop of ``del d[key]``.

Prints, per workload, each way's median seconds and the medians of the
per-repetition ratios: the loop's time (the workload's first way) over
this way's (above 1: faster than the loop) and the dict's time (its last
way) over this way's; then ``get_many``'s ratio to the loop that makes
the same list. These machines are shared; only ratios taken close
together mean anything.
"""

import argparse
import os
import shutil
import statistics
import tempfile
from time import perf_counter

from _presets import KEY_SIZE, PRESETS
from _worker import make_data

import semidbm


class Data:
    """The keys and values, and the same items as a dict."""

    def __init__(self, count, value_size):
        self.keys, self.values, _ = make_data(count, KEY_SIZE, value_size, seed=0)
        self.items = dict(zip(self.keys, self.values))


def fill_loop(db, data):
    for key, value in zip(data.keys, data.values):
        db[key] = value


def read_loop(db, data):
    for key in data.keys:
        db[key]


def delete_loop(db, data):
    for key in data.keys:
        del db[key]


#: The ways of each workload, in the order of the databases that use them.
FILLS = {
    "loop: db[key] = value": fill_loop,
    "db.update(dict)": lambda db, data: db.update(data.items),
    "db.update(zip(keys, values))": lambda db, data: db.update(zip(data.keys, data.values)),
}
READS = {
    "loop: db[key], dropped": read_loop,
    "[db[key] for key in keys]": lambda db, data: [db[key] for key in data.keys],
    "db.get_many(keys)": lambda db, data: db.get_many(data.keys),
}
DELETES = {
    "loop: del db[key]": delete_loop,
    "db.delete_many(keys)": lambda db, data: db.delete_many(data.keys),
}


def timed(action):
    """Seconds ``action()`` takes."""
    start = perf_counter()
    action()
    return perf_counter() - start


def one_database(path, data, fill, read, delete):
    """Fill, read and empty a database at ``path`` (``delete`` None: leave it full); remove it.

    Returns ``{workload: seconds}`` for the workloads it did.
    """
    seconds = {}
    new = semidbm.open(path, "n")
    start = perf_counter()
    fill(new, data)
    seconds["sets"] = perf_counter() - start
    new.close()
    seconds["fill"] = perf_counter() - start
    with semidbm.open(path, "r") as reader:
        seconds["read"] = timed(lambda: read(reader, data))
        sample = slice(None, None, max(1, len(data.keys) // 1000))
        assert reader.get_many(data.keys[sample]) == data.values[sample], "other values read"
    if delete is not None:
        writer = semidbm.open(path, "w")
        seconds["delete"] = timed(lambda: (delete(writer, data), writer.close()))
        with semidbm.open(path, "r") as reader:
            assert len(reader) == 0, "keys left after the deletes"
    shutil.rmtree(path)
    return seconds


#: The workloads in the table, and the ways to do each: the loop first, the dict's last.
WORKLOADS = {
    "fill": list(FILLS) + ["dict.update(dict)"],
    "sets": list(FILLS) + ["dict.update(dict)"],  # the fill before its close()
    "read": list(READS) + ["[d[key] for key in keys]"],
    "delete": list(DELETES) + ["loop: del d[key]"],
}


def in_a_dict(data):
    """The seconds of each workload on a dict: ``{workload: seconds}``."""
    table = {}
    filling = timed(lambda: table.update(data.items))
    seconds = {"fill": filling, "sets": filling,
               "read": timed(lambda: [table[key] for key in data.keys])}

    def empty():
        for key in data.keys:
            del table[key]

    seconds["delete"] = timed(empty)
    return seconds


def run(count, repeat):
    """Time every way ``repeat`` times; return ``{workload: {way: [seconds, ...]}}``."""
    data = Data(count, PRESETS["a"].value_size)
    # Per database: its ways to fill, read and delete (the third database is not emptied).
    plans = list(zip(FILLS, READS, list(DELETES) + [None]))
    runs = {workload: {way: [] for way in ways} for workload, ways in WORKLOADS.items()}
    with tempfile.TemporaryDirectory(prefix="semidbm-bulk-") as scratch:
        for repetition in range(repeat):
            turn = repetition % len(plans)
            for number, (fill, read, delete) in enumerate(plans[turn:] + plans[:turn]):
                seconds = one_database(
                    os.path.join(scratch, "%d-%d" % (repetition, number)), data, FILLS[fill],
                    READS[read], None if delete is None else DELETES[delete])
                ways = {"fill": fill, "sets": fill, "read": read, "delete": delete}
                for workload, value in seconds.items():
                    runs[workload][ways[workload]].append(value)
            for workload, value in in_a_dict(data).items():
                runs[workload][WORKLOADS[workload][-1]].append(value)
    return runs


def ratio(numerator, denominator):
    """The median of the per-repetition ratios ``numerator[i] / denominator[i]``."""
    return statistics.median(a / b for a, b in zip(numerator, denominator))


def report(runs):
    """The table: per workload and way, median seconds, loop/way and dict/way."""
    lines = ["%-8s %-30s %9s %9s %9s" % ("workload", "way", "seconds", "vs loop", "vs dict")]
    for workload, ways in runs.items():
        loop, in_dict = ways[WORKLOADS[workload][0]], ways[WORKLOADS[workload][-1]]
        for way, seconds in ways.items():
            lines.append("%-8s %-30s %9.4f %8.2fx %8.2fx" % (
                workload, way, statistics.median(seconds), ratio(loop, seconds),
                ratio(in_dict, seconds)))
            workload = ""
    lines.append("db.get_many(keys) vs [db[key] for key in keys], the same list: %.2fx" % ratio(
        runs["read"]["[db[key] for key in keys]"], runs["read"]["db.get_many(keys)"]))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=PRESETS["a"].keys)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    runs = run(args.keys, args.repeat)
    print("semidbm %s (%s kernel), %d keys of %d bytes, values of %d bytes, median of %d" % (
        semidbm.__version__, semidbm.implementation, args.keys, KEY_SIZE,
        PRESETS["a"].value_size, args.repeat))
    print(report(runs))


if __name__ == "__main__":
    main()
