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

NEW defaults to the working tree as committed at HEAD. Needs valgrind,
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

#: The workloads, on a database of N keys of 16 bytes with values of 100.
WORKLOADS = ("fill", "read_sequential", "read_random", "delete", "reopen")

#: Closes and read-only opens in ``reopen``. A run's count moves by up to
#: 0.25 M instructions between identical runs, whatever the workload; one
#: reopen costs about 0.46 M at 200,000 records, so three reopens swung by
#: 10-20% with no change at all, a hundred by about 1%, a thousand by 0.1%.
REOPENS = 1000

#: Runs in a fresh interpreter: argv is the workload, N and REOPENS.
SCRIPT = """
import os, random, shutil, sys, tempfile
from semidbm import _core, db

workload, count, reopens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
place = tempfile.mkdtemp()
path = os.path.join(place, "db")
keys = [b"%016d" % i for i in range(count)]
shuffled = keys[:]
random.Random(1).shuffle(shuffled)
database = db.open_with(_core, path, "c")
for key in keys:
    database[key] = b"v" * 100
database.close()
database = db.open_with(_core, path, "w")
if workload == "fill":
    for key in keys:
        database[b"x" + key] = b"v" * 100
elif workload == "read_sequential":
    for key in keys:
        database[key]
elif workload == "read_random":
    for key in shuffled:
        database[key]
elif workload == "delete":
    for key in keys:
        del database[key]
elif workload == "reopen":
    for _ in range(reopens):
        database.close()
        database = db.open_with(_core, path, "r")
database.close()
shutil.rmtree(place)
"""


def instructions(source, workload, records):
    """Instructions callgrind counts for one run of ``workload`` with ``source`` imported."""
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            ["taskset", "-c", "0", "valgrind", "--tool=callgrind",
             "--callgrind-out-file=" + os.path.join(scratch, "out"),
             sys.executable, "-c", SCRIPT, workload, str(records), str(REOPENS)],
            env=dict(os.environ, PYTHONPATH=source, PYTHONHASHSEED="0"),
            capture_output=True,
            text=True,
            check=True,
        )
    return int(re.search(r"Collected : (\d+)", result.stderr).group(1))


def measure(source, records, repeat):
    """Each workload's median count, less the median count of ``base``."""
    counts = {
        workload: statistics.median(
            instructions(source, workload, records) for _ in range(repeat)
        )
        for workload in ("base",) + WORKLOADS
    }
    return {workload: counts[workload] - counts["base"] for workload in WORKLOADS}


def main(argv=None):
    parser = commits_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    with builds(args.old, args.new) as (_, sources):
        results = {
            name: measure(source, args.records, args.repeat) for name, source in sources.items()
        }
    print("Instructions at %d records (%s -> %s), less the base run:" % (
        args.records, args.old, args.new))
    rows = []
    for workload in WORKLOADS:
        old, new = results["old"][workload], results["new"][workload]
        rows.append([workload, "%d" % old, "%d" % new, "%.4f" % (new / old)])
    print(markdown_table(["workload", "old", "new", "new / old"], rows))


if __name__ == "__main__":
    main()
