"""Zero-copy reads: ``db.view(key)`` against ``db[key]``, on the compiled kernel.

Usage (``.venv`` is made by ``bash scripts/nox.sh -s dev``)::

    .venv/bin/python benchmarks/views.py [--repeat R] [--objects N] [--quick]

Three measurements, each way (a view, or the bytes ``db[key]`` returns)
doing the same work with what it got:

- touch: preset b's data (``_presets.PRESETS["b"]``: 1,000 keys of
  100,000-byte values, made by ``_worker.make_data``), read in key
  order; each value has one byte read in every 4 KiB page (a slice with
  that step, copied: what a header parser or ``numpy.frombuffer``
  slicing touches);
- hash: the same data, each value's CRC-32 (``zlib.crc32``), which reads
  every byte;
- objects cold / warm: preset d's objects (``_shelf_worker``: values of
  1,000,000 bytes, pickled by ``shelve``), the first ``--objects`` of
  them, each unpickled (``pickle.loads``) from what the read returned;
  cold after the database's files are dropped from the page cache
  (``_pagecache``), then warm.

A repetition times each way once after the other (which goes first
alternates), each pass repeated for at least ``MIN_SECONDS`` and its
median kept (``_worker.median_pass``; a cold pass runs once); its ratio
is the copying read's time over the view's. The table gives the median
time per pass of each way and the median of the per-repetition ratios.
Nothing is written but the temporary databases; the table goes to
standard output.
"""

import argparse
import os
import pickle
import shelve
import statistics
import sys
import tempfile
import zlib
from time import perf_counter

import _pagecache
import _shelf_worker
import _worker
from _presets import KEY_SIZE, PRESETS
from _report import markdown_table

import semidbm

#: A page: the touch reads one byte in each.
PAGE = 4096

#: Each timed pass is repeated until this long has passed (the median counts).
MIN_SECONDS = 0.2

#: The preset d objects read by default (preset d has 5,000: 5 GB).
DEFAULT_OBJECTS = 500

#: The target of issue 17 for the touch: at least this many times faster through a view.
TOUCH_TARGET = 10


def touch(value):
    """One byte of every page of ``value``, copied out."""
    return bytes(value[::PAGE])


def reader(way):
    """How a pass gets a value: ``db.view`` or ``db[key]``."""
    if way == "view":
        return lambda db, key: db.view(key)
    return lambda db, key: db[key]


def value_pass(db, keys, way, work):
    """Seconds to get each of ``keys`` from the open ``db`` and do ``work`` on it.

    Each way in a plain loop, as a program would write it (``reader``'s
    extra call would add the same time to both, and shrink the ratio).
    """
    start = perf_counter()
    if way == "view":
        view = db.view
        for key in keys:
            work(view(key))
    else:
        for key in keys:
            work(db[key])
    return perf_counter() - start


def object_pass(path, keys, way, cold):
    """Seconds to open ``path``, unpickle the objects of ``keys`` and close it.

    ``cold``: the database's files are dropped from the page cache first.
    """
    get = reader(way)
    if cold:
        _pagecache.drop(path)
    start = perf_counter()
    with semidbm.open(path, "r") as db:
        for key in keys:
            pickle.loads(get(db, key))
    return perf_counter() - start


def fill_values(path, keys, values):
    """Write preset b's pairs into a new database at ``path``."""
    with semidbm.open(path, "n") as db:
        for key, value in zip(keys, values):
            db[key] = value


def fill_objects(path, count):
    """Write the first ``count`` of preset d's objects through shelve; return their raw keys."""
    pool = _shelf_worker.large_pool(0)
    keys = _shelf_worker.large_keys(count)
    with shelve.Shelf(semidbm.open(path, "n")) as shelf:
        for number, key in enumerate(keys):
            shelf[key] = pool[number % len(pool)]
    with semidbm.open(path, "r") as db:
        for number, key in enumerate(keys):
            for way in ("view", "copy"):
                if pickle.loads(reader(way)(db, key.encode())) != pool[number % len(pool)]:
                    sys.exit("read back a wrong object for %s (%s)" % (key, way))
    return [key.encode() for key in keys]


def check_values(path, keys, values):
    """Exit unless both ways read back preset b's values."""
    with semidbm.open(path, "r") as db:
        for key, value in zip(keys, values):
            if db.view(key) != value or db[key] != value:
                sys.exit("read back a wrong value for %r" % key)


def settle(path, keys):
    """One cold pass each way, untimed: the first after the fill runs slower (seen: 1.7x)."""
    for way in ("view", "copy"):
        object_pass(path, keys, way, True)


def measurements(values, objects, data_keys, object_keys, min_seconds):
    """The measurements by name: a function of the way that times one pass.

    ``values`` is preset b's database, open (as a program that reads it
    keeps it); ``objects`` the path of preset d's, which each pass opens
    and closes, as a shelf is used.
    """

    def timed(run_pass):
        return lambda way: _worker.median_pass(lambda: run_pass(way), min_seconds)

    return {
        "touch": timed(lambda way: value_pass(values, data_keys, way, touch)),
        "hash": timed(lambda way: value_pass(values, data_keys, way, zlib.crc32)),
        "objects cold": lambda way: object_pass(objects, object_keys, way, True),
        "objects warm": timed(lambda way: object_pass(objects, object_keys, way, False)),
    }


def run(repeat, places, data_keys, object_keys, min_seconds):
    """Return ``{measurement: [(copy seconds, view seconds), ...]}``, one pair a repetition."""
    times = {}
    for repetition in range(repeat):
        order = ("view", "copy") if repetition % 2 == 0 else ("copy", "view")
        with semidbm.open(places[0], "r") as values:
            chosen = measurements(values, places[1], data_keys, object_keys, min_seconds)
            for name, measure in chosen.items():
                seconds = {way: measure(way) for way in order}
                times.setdefault(name, []).append((seconds["copy"], seconds["view"]))
        print("repetition %d/%d done" % (repetition + 1, repeat), file=sys.stderr)
    return times


def summary(times):
    """Per measurement: median ms per pass each way, and the median per-repetition ratio."""
    rows = {}
    for name, pairs in times.items():
        rows[name] = (
            statistics.median(copy for copy, _ in pairs) * 1000,
            statistics.median(view for _, view in pairs) * 1000,
            statistics.median(copy / view for copy, view in pairs),
        )
    return rows


def table(rows, repeat, values, objects):
    """The report: a Markdown table of the rows ``summary`` made, and the touch target."""
    lines = [
        "db.view(key) against db[key], compiled kernel; %d repetitions (medians);" % repeat,
        "preset b: %d values of %d bytes; preset d: %d objects of %d bytes%s."
        % (values[0], values[1], objects, _shelf_worker.LARGE_SIZE,
           "" if _pagecache.COLD else " (no posix_fadvise: \"cold\" ran warm)"),
        "",
        markdown_table(
            ["measurement", "db[key], ms/pass", "view, ms/pass", "db[key] time / view time"],
            [[name, "%.2f" % copy, "%.2f" % view, "%.2fx" % ratio]
             for name, (copy, view, ratio) in rows.items()],
        ),
    ]
    met = rows["touch"][2] >= TOUCH_TARGET
    lines += ["", "touch target (at least %dx): %s" % (TOUCH_TARGET, "met" if met else "MISSED")]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (5)")
    parser.add_argument(
        "--objects", type=int, help="preset d objects (%d; 10 with --quick)" % DEFAULT_OBJECTS
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, short passes")
    args = parser.parse_args(argv)
    if semidbm.implementation != "cython":
        sys.exit("the compiled kernel is not in use: the pure-Python kernel's views are copies")
    preset = PRESETS["b"]
    count = preset.quick_keys if args.quick else preset.keys
    objects = args.objects or (10 if args.quick else DEFAULT_OBJECTS)
    min_seconds = 0.01 if args.quick else MIN_SECONDS
    keys, values, _ = _worker.make_data(count, KEY_SIZE, preset.value_size, 0)
    with tempfile.TemporaryDirectory() as place:
        places = (os.path.join(place, "values"), os.path.join(place, "objects"))
        fill_values(places[0], keys, values)
        check_values(places[0], keys, values)
        object_keys = fill_objects(places[1], objects)
        settle(places[1], object_keys)
        times = run(args.repeat, places, keys, object_keys, min_seconds)
    print(table(summary(times), args.repeat, (count, preset.value_size), objects))


if __name__ == "__main__":
    main()
