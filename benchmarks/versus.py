"""The compiled kernel at two commits, timed side by side on a preset's dbm workloads.

Where ``instructions.py`` counts instructions, this times wall clock:
for each commit it checks out a worktree and builds the compiled kernel
there (``_builds.checkout``), then runs ``_worker.py``'s semidbm
contender with each build in turn (old, new, old, new, ...), each run a
fresh process on the same data, for ``--repeat`` repetitions. The table
gives each workload's median rate (or time) per commit and the median of
the per-repetition ratios new / old (above 1 is faster), as
``compare.py`` does: these machines are shared, and only ratios taken
close together mean anything. Besides ``_worker.py``'s workloads, each
repetition times ``rebuild_seconds``: opening one database of the preset
with its index file removed, so that the whole log is replayed (the
slow path of an open: ``reopen_seconds`` goes through the index), and
``compact_seconds``: compacting a copy of that database, every record
of which is live and copied. ``--no-workloads`` times those two alone,
more repetitions in the same time; ``--kernel python`` times them with
the pure-Python kernel of each commit (``SEMIDBM_PURE_PYTHON=1``; the
worker's workloads are the compiled kernel's, so it implies
``--no-workloads``).

    .venv/bin/python benchmarks/versus.py OLD [NEW] [--preset a|b] [--repeat R]
        [--kernel cython|python] [--no-workloads]

NEW defaults to the working tree as committed at HEAD. Preset a is
1,000,000 keys of 16 bytes with values of 100 bytes, b 1,000 keys with
values of 100,000 bytes (``_presets.PRESETS``).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

from _builds import builds, commits_parser
from _presets import KEY_SIZE, PRESETS
from _report import markdown_table

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")

#: The presets this runs: preset a's many small records, or b's large values.
CHOICES = ("a", "b")


def sizes(preset):
    """The keys, value size and key size of ``preset``."""
    return PRESETS[preset].keys, PRESETS[preset].value_size, KEY_SIZE


def run_worker(source, preset, seed):
    """One run of the semidbm contender with the kernel built in ``source``: its JSON result."""
    keys, value_size, key_size = sizes(preset)
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(
            [sys.executable, WORKER, "semidbm", "--keys", str(keys), "--value-size",
             str(value_size), "--key-size", str(key_size), "--dir", scratch, "--seed", str(seed)],
            env=dict(os.environ, PYTHONPATH=source),
            stdout=subprocess.PIPE,
            text=True,
            check=True,
        )
    return json.loads(done.stdout)


#: Makes the preset's database at argv[1] (keys, value size, key size after it) and
#: removes its index file: every open of it replays the whole log.
MAKE_UNINDEXED = """
import os, sys
import semidbm
path, keys, value_size, key_size = sys.argv[1], *map(int, sys.argv[2:])
value = os.urandom(value_size + 1000)
with semidbm.open(path, "n") as database:
    for number in range(keys):
        database[b"%0*d" % (key_size, number)] = value[number % 1000 :][:value_size]
os.remove(os.path.join(path, "index"))
"""

#: Prints the seconds that opening the database at argv[1] read-only, and len(), take.
TIME_OPEN = """
import sys, time
import semidbm
start = time.perf_counter()
with semidbm.open(sys.argv[1], "r") as database:
    len(database)
print(time.perf_counter() - start)
"""


#: Prints the seconds that compacting a copy (at argv[2]) of the database at argv[1] takes.
TIME_COMPACT = """
import shutil, sys, time
import semidbm
shutil.copytree(sys.argv[1], sys.argv[2])
with semidbm.open(sys.argv[2], "w") as database:
    start = time.perf_counter()
    database.compact()
    print(time.perf_counter() - start)
shutil.rmtree(sys.argv[2])
"""


def python_with(source, code, *args, pure=False):
    """Run ``code`` with the semidbm of ``source`` (its pure kernel if ``pure``); its output."""
    environment = dict(os.environ, PYTHONPATH=source)
    if pure:
        environment["SEMIDBM_PURE_PYTHON"] = "1"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        env=environment,
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    ).stdout


def figures(result):
    """A run's figures by workload: rates, and the reopen's seconds."""
    found = dict(result["ops_per_sec"])
    found["reopen_seconds"] = result["reopen_seconds"]
    return found


def main(argv=None):
    parser = commits_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=CHOICES, default="a")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kernel", choices=("cython", "python"), default="cython")
    parser.add_argument("--no-workloads", action="store_true")
    args = parser.parse_args(argv)
    pure = args.kernel == "python"
    workloads = not (pure or args.no_workloads)
    runs = {"old": [], "new": []}
    with builds(args.old, args.new) as (place, sources):
        unindexed = os.path.join(place, "unindexed")
        copy = os.path.join(place, "compacted")
        python_with(sources["new"], MAKE_UNINDEXED, unindexed, *sizes(args.preset))
        for repetition in range(args.repeat):
            for name in ("old", "new"):
                source = sources[name]
                found = figures(run_worker(source, args.preset, repetition)) if workloads else {}
                found["rebuild_seconds"] = float(
                    python_with(source, TIME_OPEN, unindexed, pure=pure))
                found["compact_seconds"] = float(
                    python_with(source, TIME_COMPACT, unindexed, copy, pure=pure))
                runs[name].append(found)
    print("Preset %s, the %s kernel, %s -> %s, medians of %d interleaved repetitions:" % (
        args.preset, args.kernel, args.old, args.new, args.repeat))
    rows = []
    for workload in runs["old"][0]:
        old = [run[workload] for run in runs["old"]]
        new = [run[workload] for run in runs["new"]]
        # A time is better smaller: its ratio is turned round, so above 1 is faster.
        ratios = [
            (o / n) if workload.endswith("_seconds") else (n / o) for o, n in zip(old, new)
        ]
        rows.append([workload, "%.4g" % statistics.median(old), "%.4g" % statistics.median(new),
                     "%.3f" % statistics.median(ratios)])
    print(markdown_table(["workload", "old", "new", "new / old, faster above 1"], rows))


if __name__ == "__main__":
    main()
