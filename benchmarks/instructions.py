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

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The workloads, on a database of N keys of 16 bytes with values of 100.
WORKLOADS = ("fill", "read_sequential", "read_random", "delete", "reopen")

#: Runs in a fresh interpreter: argv is the workload and N.
SCRIPT = """
import os, random, shutil, sys, tempfile
from semidbm import _core, db

workload, count = sys.argv[1], int(sys.argv[2])
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
    for _ in range(3):
        database.close()
        database = db.open_with(_core, path, "r")
database.close()
shutil.rmtree(place)
"""


def checkout(commit, place):
    """A worktree of ``commit`` in ``place`` with the compiled kernel built in place."""
    subprocess.run(
        ["git", "-C", REPOSITORY, "worktree", "add", "--detach", "-f", place, commit],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=place,
        check=True,
        capture_output=True,
    )
    return os.path.join(place, "src")


def remove_worktrees(place):
    """Remove the worktrees ``checkout`` made in ``place`` (``old``, ``new``), and ``place``."""
    for name in ("old", "new"):
        if os.path.exists(os.path.join(place, name)):
            subprocess.run(
                ["git", "-C", REPOSITORY, "worktree", "remove", "--force",
                 os.path.join(place, name)],
                capture_output=True,
            )
    shutil.rmtree(place, ignore_errors=True)


def commits_parser(description):
    """An argument parser with the two commits every benchmark of two builds takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("old", help="the commit to compare against")
    parser.add_argument("new", nargs="?", default="HEAD", help="the commit measured (HEAD)")
    return parser


@contextlib.contextmanager
def builds(old, new):
    """The commits ``old`` and ``new`` checked out and built in a temporary directory.

    Yields ``(place, sources)``: the directory, for scratch files too,
    and each build's ``src`` by name ("old", "new"). The worktrees and
    the directory are removed at the end.
    """
    with tempfile.TemporaryDirectory() as place:
        try:
            yield place, {
                name: checkout(commit, os.path.join(place, name))
                for name, commit in (("old", old), ("new", new))
            }
        finally:
            remove_worktrees(place)


def instructions(source, workload, records):
    """Instructions callgrind counts for one run of ``workload`` with ``source`` imported."""
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(
            ["taskset", "-c", "0", "valgrind", "--tool=callgrind",
             "--callgrind-out-file=" + os.path.join(scratch, "out"),
             sys.executable, "-c", SCRIPT, workload, str(records)],
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
    print("| workload | old | new | new / old |")
    print("|---|---:|---:|---:|")
    for workload in WORKLOADS:
        old, new = results["old"][workload], results["new"][workload]
        print("| %s | %d | %d | %.4f |" % (workload, old, new, new / old))


if __name__ == "__main__":
    main()
