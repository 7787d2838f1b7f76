"""semidbm.Cache's memoize against diskcache's: a hit, a miss, and what a hit adds to a call.

    .venv/bin/python benchmarks/cache.py [--repeat R] [--calls N] [--out-dir DIR] [--quick]

Each repetition times, on a new cache of each library in a temporary
directory (their defaults, semidbm's flag ``'c'``), the same function
memoized by both, without an expiry and with one (``memoize(expire=3600)``):
``hit``, the calls of ``--calls`` arguments already kept; ``miss``,
calls with arguments never seen (each computes and keeps its result);
and ``bare``, the function called unwrapped, for the ``overhead`` of a
hit: its time less the bare call's. The two libraries
alternate within each repetition, and a ratio is the median of the
per-repetition ratios (diskcache's time over semidbm's). The targets
(issue 33): a hit's overhead at most 3 us, and at least 10x diskcache
on hits and 20x on misses. Prints a table; writes it (``cache.md``) and
the raw times (``cache.json``) to ``--out-dir``, by default a new
directory under ``results/cache/`` (ignored by git).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import diskcache
from _results import results_directory

import semidbm

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, "results", "cache")
#: The most a hit may add to a call, in microseconds, and the least ratios to diskcache.
OVERHEAD_TARGET = 3.0
HIT_TARGET = 10.0
MISS_TARGET = 20.0
LIBRARIES = ("semidbm", "diskcache")
#: The lifetimes measured: none, and an hour.
EXPIRES = (None, 3600)


def work(number, label="x"):
    """The function both memoize: a small result of two arguments, computed at once."""
    return (label, number * 2)


def memoized(library, place, expire):
    """``work`` memoized by ``library`` for ``expire`` seconds in a new cache at ``place``, and
    the cache."""
    if library == "semidbm":
        cache = semidbm.Cache(os.path.join(place, "semidbm.cache"))
    else:
        cache = diskcache.Cache(os.path.join(place, "diskcache"))
    return cache.memoize(expire=expire)(work), cache


def per_call(function, arguments):
    """Seconds per call of ``function`` over ``arguments``."""
    start = time.perf_counter()
    for number in arguments:
        function(number)
    return (time.perf_counter() - start) / len(arguments)


def measurement(what, expire):
    """A measurement's name: ``hit`` or ``miss``, and the lifetime if there is one."""
    return what if expire is None else "%s, expire=%d" % (what, expire)


def repetition(calls):
    """One repetition: ``{library: {measurement: s}, "bare": s}``, seconds a call."""
    times = {library: {} for library in LIBRARIES}
    kept = range(calls)
    for expire in EXPIRES:
        for library in LIBRARIES:
            with tempfile.TemporaryDirectory() as place:
                function, cache = memoized(library, place, expire)
                try:
                    times[library][measurement("miss", expire)] = per_call(function, kept)
                    times[library][measurement("hit", expire)] = per_call(function, kept)
                finally:
                    cache.close()
    times["bare"] = per_call(work, kept)
    return times


def summary(runs):
    """Per measurement, the medians (in seconds) and the median of per-repetition ratios; and
    the median overhead of a hit (the larger of the two lifetimes')."""
    rows = {}
    for what in runs[0]["semidbm"]:
        ours = [run["semidbm"][what] for run in runs]
        theirs = [run["diskcache"][what] for run in runs]
        ratios = [run["diskcache"][what] / run["semidbm"][what] for run in runs]
        rows[what] = (statistics.median(ours), statistics.median(theirs),
                      statistics.median(ratios), min(ratios), max(ratios))
    overhead = max(
        statistics.median(run["semidbm"][what] - run["bare"] for run in runs)
        for what in rows if what.startswith("hit")
    )
    return rows, overhead


def table(rows, overhead, repeat, calls):
    """The report: a row per measurement, and whether each target was met."""
    lines = [
        "memoize, %d calls a measurement, median of %d interleaved repetitions "
        "(semidbm %s kernel, diskcache %s)"
        % (calls, repeat, semidbm.implementation, diskcache.__version__),
        "",
        "| call | semidbm (us) | diskcache (us) | diskcache / semidbm (least-greatest) |",
        "|---|---:|---:|---:|",
    ]
    for what, (ours, theirs, ratio, least, greatest) in rows.items():
        lines.append("| %s | %.2f | %.2f | %.1fx (%.1f-%.1f) |"
                     % (what, ours * 1e6, theirs * 1e6, ratio, least, greatest))
    checks = [
        ("a hit's overhead at most %.0f us: %.2f us" % (OVERHEAD_TARGET, overhead * 1e6),
         overhead * 1e6 <= OVERHEAD_TARGET),
        ("hits at least %.0fx diskcache" % HIT_TARGET,
         all(row[2] >= HIT_TARGET for what, row in rows.items() if what.startswith("hit"))),
        ("misses at least %.0fx diskcache" % MISS_TARGET,
         all(row[2] >= MISS_TARGET for what, row in rows.items() if what.startswith("miss"))),
    ]
    lines.append("")
    lines += ["%s: %s" % (name, "met" if met else "MISSED") for name, met in checks]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (5)")
    parser.add_argument("--calls", type=int, help="calls a measurement (20000; 200 with --quick)")
    parser.add_argument("--out-dir", help="where the reports go (a new directory under "
                        "results/cache/)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for the tests")
    args = parser.parse_args(argv)
    calls = args.calls or (200 if args.quick else 20_000)
    out = results_directory(args.out_dir, RESULTS)
    runs = [repetition(calls) for _ in range(args.repeat)]
    rows, overhead = summary(runs)
    report = table(rows, overhead, args.repeat, calls)
    print(report)
    with open(os.path.join(out, "cache.md"), "w") as stream:
        stream.write(report + "\n")
    with open(os.path.join(out, "cache.json"), "w") as stream:
        json.dump({"calls": calls, "runs": runs, "python": sys.version}, stream, indent=2)
    print("reports in %s" % out)


if __name__ == "__main__":
    main()
