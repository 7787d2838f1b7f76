"""Instructions the compiled kernel's hot paths execute, at two commits, under callgrind.

Wall time on a shared machine swings by several percent between
identical runs; instruction counts do not. For each commit this checks
out a worktree (in a temporary directory), builds the compiled kernel
there, and runs each workload in a fresh interpreter under
``valgrind --tool=callgrind``, pinned to one processor (so the index
rebuild parses in one thread: the spinning of two would vary the count)
with a fixed ``PYTHONHASHSEED``. A workload's count is its run less the
``base`` run (interpreter start, imports, the fill it starts from), so
what is compared is the work itself. The table gives both counts and
new / old; the median of ``--repeat`` runs counts.

    .venv/bin/python benchmarks/instructions.py OLD [NEW] [--records N] [--repeat R]
        [--new-without-index]

NEW defaults to the working tree as committed at HEAD. With
``--new-without-index``, NEW's runs remove the index file before they
reopen the database, so that its keys are in the private table, and no
run of either side writes an index file at its last close (the private
table's would write one of every key, the base run's too):
``instructions.py HEAD HEAD --new-without-index`` sets the lookups
through the mapped index file (old) against the private table's (new),
in the reads and the delete; fill and reopen then differ by more than
lookups. Needs valgrind,
taskset and git; takes about a minute a workload and commit at 200,000
records. ``bash scripts/nox.sh -s dev`` makes ``.venv``.
"""

import os
import re
import statistics
import subprocess
import sys
import tempfile

from _builds import builds, commits_parser
from _report import markdown_table

#: The workloads, on a database of N keys of 16 bytes with values of 100; ``read_sharded``
#: reads the keys of ``read_random``, in its order, through a sharded database of the same
#: keys and values in SHARDS shards (each run makes it, the base run too).
WORKLOADS = ("fill", "read_sequential", "read_random", "read_sharded", "delete", "reopen")

#: The shards of ``read_sharded``'s database (as the Dask benchmark's lookups).
SHARDS = 8

#: Closes and read-only opens in ``reopen``. A run's count moves by up to
#: 0.25 M instructions between identical runs, whatever the workload; one
#: reopen costs about 0.46 M at 200,000 records, so three reopens swung by
#: 10-20% with no change at all, a hundred by about 1%, a thousand by 0.1%.
REOPENS = 1000

#: Runs in a fresh interpreter: argv is the workload, N, REOPENS, what becomes of the index
#: file before the reopen ("kept" or "removed"), and whether the last close may write one
#: ("writes", "no writes"). The key hash's seed and the checkpoints' nonces come from
#: ``os.urandom``: fixed here, every run probes the same slots (with random seeds, the same
#: build's reads differed by 1% between runs).
SCRIPT = """
import os, random, shutil, sys, tempfile
os.urandom = lambda size: bytes(range(7, 7 + size))
from semidbm import _core, _settings, db, sharded

workload, count, reopens, shards = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[6])
place = tempfile.mkdtemp()
path = os.path.join(place, "db")
sharded_path = os.path.join(place, "sharded")
keys = [b"%016d" % i for i in range(count)]
shuffled = keys[:]
random.Random(1).shuffle(shuffled)
database = db.open_with(_core, path, "c")
for key in keys:
    database[key] = b"v" * 100
database.close()
with sharded.open_sharded_with(_core, sharded_path, "c", shards=shards) as several:
    several.update(dict.fromkeys(keys, b"v" * 100))
if sys.argv[4] == "removed":
    os.remove(os.path.join(path, "index"))
    for shard in several.shards:
        os.remove(os.path.join(os.path.dirname(shard.path), "index"))
if sys.argv[5] == "no writes":
    _settings.INDEX_MIN_TAIL = 1 << 62
database = db.open_with(_core, path, "w")
several = sharded.open_sharded_with(_core, sharded_path, "w")
if workload == "fill":
    for key in keys:
        database[b"x" + key] = b"v" * 100
elif workload == "read_sequential":
    for key in keys:
        database[key]
elif workload == "read_random":
    for key in shuffled:
        database[key]
elif workload == "read_sharded":
    for key in shuffled:
        several[key]
elif workload == "delete":
    for key in keys:
        del database[key]
elif workload == "reopen":
    for _ in range(reopens):
        database.close()
        database = db.open_with(_core, path, "r")
database.close()
several.close()
shutil.rmtree(place)
"""


def instructions(source, workload, records, index, writes):
    """Instructions callgrind counts for one run of ``workload`` with ``source`` imported
    (``index``: whether the reopen finds the index file; ``writes``: whether the last close
    may write one)."""
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            ["taskset", "-c", "0", "valgrind", "--tool=callgrind",
             "--callgrind-out-file=" + os.path.join(scratch, "out"),
             sys.executable, "-c", SCRIPT, workload, str(records), str(REOPENS),
             "kept" if index else "removed", "writes" if writes else "no writes", str(SHARDS)],
            env=dict(os.environ, PYTHONPATH=source, PYTHONHASHSEED="0"),
            capture_output=True,
            text=True,
            check=True,
        )
    return int(re.search(r"Collected : (\d+)", result.stderr).group(1))


def measure(source, records, repeat, index=True, writes=True):
    """Each workload's median count, less the median count of ``base``."""
    counts = {
        workload: statistics.median(
            instructions(source, workload, records, index, writes) for _ in range(repeat)
        )
        for workload in ("base",) + WORKLOADS
    }
    return {workload: counts[workload] - counts["base"] for workload in WORKLOADS}


def main(argv=None):
    parser = commits_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--new-without-index", action="store_true",
                        help="NEW's reopens find no index file (the private table)")
    args = parser.parse_args(argv)
    with builds(args.old, args.new) as (_, sources):
        results = {
            name: measure(source, args.records, args.repeat,
                          index=not (name == "new" and args.new_without_index),
                          writes=not args.new_without_index)
            for name, source in sources.items()
        }
    print("Instructions at %d records (%s -> %s%s), less the base run:" % (
        args.records, args.old, args.new,
        " without its index file" if args.new_without_index else ""))
    rows = []
    for workload in WORKLOADS:
        old, new = results["old"][workload], results["new"][workload]
        rows.append([workload, "%d" % old, "%d" % new, "%.4f" % (new / old)])
    print(markdown_table(["workload", "old", "new", "new / old"], rows))


if __name__ == "__main__":
    main()
