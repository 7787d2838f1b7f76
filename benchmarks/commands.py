"""The ``semidbm`` command at two commits, timed side by side on one large database.

The commands that go over a whole database (``stats``, ``verify``,
``keys``, ``keys -e``, ``export``) are run with each commit's build in
turn (old, new, old, new, ...), each a fresh process on the same
database, for ``--repeat`` repetitions; the table gives each command's
median seconds per commit and the median of the per-repetition ratios
old / new (above 1 is faster). The database is the one of issue 15:
``--keys`` keys ``b"%d" % i`` with the values ``b"value %d" % i``, made
with the new commit's build (so it has its index file).

    .venv/bin/python benchmarks/commands.py OLD [NEW] [--keys N] [--repeat R]

NEW defaults to HEAD. Each commit is checked out and built as
``_builds.checkout`` does; the dump goes to a scratch file.
"""

import os
import statistics
import subprocess
import sys
import time

from _builds import builds, commits_parser
from _report import format_number, markdown_table

#: Makes the database at argv[1] with int(argv[2]) keys.
MAKE = """
import sys
import semidbm
with semidbm.open(sys.argv[1], "n") as database:
    for number in range(int(sys.argv[2])):
        database[b"%d" % number] = b"value %d" % number
"""

#: Each command's arguments after ``semidbm``: DB and DUMP stand for the paths.
COMMANDS = {
    "stats": ["stats", "DB"],
    "verify": ["verify", "DB"],
    "keys": ["keys", "DB"],
    "keys -e": ["keys", "-e", "DB"],
    "export": ["export", "DB", "DUMP"],
}


def seconds(source, arguments):
    """Wall-clock seconds of one run of ``python -m semidbm ARGUMENTS`` with ``source``."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "semidbm", *arguments],
        env=dict(os.environ, PYTHONPATH=source),
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def main(argv=None):
    parser = commits_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    runs = {(name, command): [] for name in ("old", "new") for command in COMMANDS}
    with builds(args.old, args.new) as (place, sources):
        database = os.path.join(place, "keys.db")
        subprocess.run([sys.executable, "-c", MAKE, database, str(args.keys)],
                       env=dict(os.environ, PYTHONPATH=sources["new"]), check=True)
        paths = {"DB": database, "DUMP": os.path.join(place, "dump.txt")}
        for _ in range(args.repeat):
            for command, arguments in COMMANDS.items():
                for name in ("old", "new"):
                    runs[name, command].append(
                        seconds(sources[name], [paths.get(part, part) for part in arguments])
                    )
    print("semidbm commands on %s keys, %s -> %s, medians of %d interleaved repetitions:" % (
        format_number(args.keys), args.old, args.new, args.repeat))
    rows = []
    for command in COMMANDS:
        old, new = runs["old", command], runs["new", command]
        ratio = statistics.median(o / n for o, n in zip(old, new))
        rows.append([command, "%.3f" % statistics.median(old), "%.3f" % statistics.median(new),
                     "%.1f" % ratio])
    print(markdown_table(["command", "old, s", "new, s", "old / new, faster above 1"], rows))


if __name__ == "__main__":
    main()
