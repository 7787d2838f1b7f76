"""Runs the classic dbm benchmark on semidbm and its rivals, side by side.

Usage::

    .venv/bin/python benchmarks/compare.py [--keys N] [--repeat R]
        [--value-size B] [--key-size K] [--with-dumb] [--out FILE.md]

The workloads and the rules for a fair comparison are in
``/work/shared/BENCHMARK.md``. The contenders:

- ``semidbm``: our package on its compiled (Cython) kernel; the worker
  stops with an error if ``semidbm.implementation`` is anything else;
- ``semidbm-python``: our package with ``SEMIDBM_PURE_PYTHON=1``;
- ``semidbm-0.5.1``: the original from PyPI, run by ``.venv-v051/bin/python``
  (or by ``$SEMIDBM_V051_PYTHON`` if set), since it has our import name;
- ``dbm.gnu`` and ``dbm.dumb`` from the standard library (dumb only up to
  100,000 keys unless ``--with-dumb``: it is slow);
- ``lmdb``: LMDB through its native binding (write transactions of
  ``put``/``delete``, read transactions of ``get``), at its default durability;
- ``dict``: the ceiling, since nothing that keeps its data in a file beats it.

Each run of a contender is a fresh process (``benchmarks/_worker.py``)
that times every workload and checks the data it reads back. The
contenders take turns (A B C, A B C, ...) for ``--repeat`` repetitions, all
on the same data within a repetition: these machines are shared, and an
absolute figure can move by 2x from one run to the next, so what counts
is the median of the per-repetition ratios. The databases go in the
system's temporary directory (``$TMPDIR`` to choose another; its
filesystem is named in the report, since fsync costs differ).

Besides the workloads, each run measures (in a fresh process) the time
to reopen the db that fill_sequential wrote (open, length, one lookup)
and the anonymous memory the reopened db keeps, per key: that is the
price of semidbm's in-memory index, which the others may not pay.

The report is a Markdown document on stdout (and in ``--out``): the
machine, the parameters and this command line, then the median
operations per second, the ratios of ``semidbm`` and ``semidbm-python``
to every other contender, the reopen times with their ratios and the
index memory. Progress goes to stderr.
"""

import argparse
import datetime
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "_worker.py")

CONTENDERS = [
    "semidbm",
    "semidbm-python",
    "semidbm-0.5.1",
    "dbm.gnu",
    "dbm.dumb",
    "lmdb",
    "dict",
]

#: The contenders the ratio tables compare against all the others.
BASELINES = ["semidbm", "semidbm-python"]

#: In the order the worker runs them.
WORKLOADS = [
    "fill_sequential",
    "read_sequential",
    "read_random",
    "read_hot",
    "delete_sequential",
    "fill_random",
]

#: dbm.dumb runs by default only up to this many keys.
DUMB_KEY_LIMIT = 100_000


def interpreter(name):
    """Return the Python that runs contender ``name``."""
    if name == "semidbm-0.5.1":
        default = os.path.join(REPO, ".venv-v051", "bin", "python")
        return os.environ.get("SEMIDBM_V051_PYTHON", default)
    return sys.executable


def worker_environment(name):
    """Return the environment for contender ``name``: only semidbm-python forces the pure kernel."""
    env = dict(os.environ)
    env.pop("SEMIDBM_PURE_PYTHON", None)
    if name == "semidbm-python":
        env["SEMIDBM_PURE_PYTHON"] = "1"
    return env


def run_worker(name, args, seed):
    """Run one contender in a fresh process; return the worker's JSON result as a dict.

    A missing interpreter or module gives ``{"missing": reason}``; any
    other failure (a wrong read-back among them) ends this program.
    """
    python = interpreter(name)
    if not os.access(python, os.X_OK):
        return {"contender": name, "missing": "no interpreter at %s" % python}
    with tempfile.TemporaryDirectory(prefix="semidbm-bench-") as directory:
        command = [
            python,
            WORKER,
            name,
            "--keys", str(args.keys),
            "--value-size", str(args.value_size),
            "--key-size", str(args.key_size),
            "--dir", directory,
            "--seed", str(seed),
        ]
        done = subprocess.run(
            command, env=worker_environment(name), capture_output=True, text=True
        )
    if done.returncode != 0:
        sys.exit(
            "%s failed (exit status %d):\n%s" % (name, done.returncode, done.stderr.strip())
        )
    return json.loads(done.stdout)


def source_version():
    """Return the repository's commit, and whether src/ has uncommitted changes.

    compare.py notes it at the start and at the end of a run: the
    workers import the source tree as it is when each one starts, so a
    change in between (a commit, a rebuilt kernel) would mix versions.
    """
    def git(*arguments):
        done = subprocess.run(["git", "-C", REPO, *arguments], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short", "HEAD")
    if commit is None:
        return "unknown (not a git checkout)"
    if git("status", "--porcelain", "--", "src"):
        return commit + " with uncommitted changes in src/"
    return commit


def cpu_model():
    """Return the CPU model named in /proc/cpuinfo (or what platform knows)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def filesystem_type(path):
    """Return the type of the filesystem holding ``path``, from /proc/mounts."""
    path = os.path.realpath(path)
    best_mount, best_type = "", "unknown"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                mount, kind = line.split()[1:3]
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best_mount):
                    best_mount, best_type = mount, kind
    except OSError:
        pass
    return best_type


def format_ops(value):
    """Format operations per second as a whole number with thousands separators."""
    return "{:,.0f}".format(value)


def significant(value, digits=3):
    """Format ``value`` to ``digits`` significant digits without an exponent.

    E.g. ``0.000390``, ``1.20``, ``4610``: the reopen times and their
    ratios span several orders of magnitude, and a fixed number of
    decimals would print the small ones as zero.
    """
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return "{:.{}f}".format(value, decimals)


def format_seconds(value):
    """Format seconds to three significant digits, e.g. ``0.0123``."""
    return significant(value)


def format_ratio(value):
    """Format a ratio to three significant digits, e.g. ``1.23x`` or ``0.00180x``."""
    return significant(value) + "x"


def markdown_table(header, rows, numeric=True):
    """Return a Markdown table; with ``numeric``, all columns but the first are right-aligned."""
    rule = "|---:" if numeric else "|---"
    lines = [
        "| " + " | ".join(header) + " |",
        "|---" + rule * (len(header) - 1) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def report(args, runs, absent, source_at_start):
    """Return the Markdown report.

    ``runs`` maps each contender that ran to its list of worker results,
    one per repetition; ``absent`` maps each other contender to the
    reason it did not run; ``source_at_start`` is ``source_version()``
    when the run began.
    """
    source_at_end = source_version()
    if source_at_end == source_at_start:
        source = "- semidbm source: commit %s" % source_at_start
    else:
        source = (
            "- semidbm source: **changed during the run**, from commit %s to %s: "
            "the repetitions may have run different code" % (source_at_start, source_at_end)
        )
    temporary = tempfile.gettempdir()
    lines = [
        "# Classic dbm benchmark: %s keys" % format_ops(args.keys),
        "",
        "- Command: `%s` (in `%s`)" % (shlex.join(sys.orig_argv), os.getcwd()),
        "- Date: %s" % datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "- Machine: %s, %d CPUs, %s" % (cpu_model(), os.cpu_count(), platform.platform()),
        source,
        "- Databases in: %s (%s)" % (temporary, filesystem_type(temporary)),
        "- Parameters: %s keys of %d bytes, values of %d bytes; %d repetitions, "
        "contenders interleaved, each run a fresh process; the data set is the same "
        "for every contender in a repetition (seed = repetition number)"
        % (format_ops(args.keys), args.key_size, args.value_size, args.repeat),
        "- Figures are operations per second over a whole pass (higher is better). "
        "Opening a db is not timed; closing a written one (for lmdb: committing the "
        "transaction and closing the environment) is. "
        "Every run read back a sample of its data and checked it.",
        "",
        "## Contenders",
        "",
    ]
    rows = []
    for name in CONTENDERS:
        if name in runs:
            first = runs[name][0]
            rows.append(
                [
                    name,
                    first["implementation"],
                    first["python"],
                    "`%s`" % interpreter(name),
                    first["durability"],
                ]
            )
        else:
            rows.append([name, absent[name], "", "`%s`" % interpreter(name), ""])
    lines += [
        markdown_table(
            ["contender", "implementation", "Python", "interpreter", "durability"],
            rows,
            numeric=False,
        ),
        "",
        "## Operations per second (median of %d)" % args.repeat,
        "",
    ]

    def absent_cell(name):
        return "missing" if absent[name].startswith("missing") else "not run"

    def cell(name, workload):
        if name not in runs:
            return absent_cell(name)
        return format_ops(statistics.median(r["ops_per_sec"][workload] for r in runs[name]))

    rows = [[workload] + [cell(name, workload) for name in CONTENDERS] for workload in WORKLOADS]
    lines += [markdown_table(["workload"] + CONTENDERS, rows), ""]

    for baseline in BASELINES:
        if baseline not in runs:
            continue
        others = [name for name in CONTENDERS if name != baseline]

        def ratio(name, workload):
            if name not in runs:
                return cell(name, workload)
            per_repetition = [
                mine["ops_per_sec"][workload] / theirs["ops_per_sec"][workload]
                for mine, theirs in zip(runs[baseline], runs[name])
            ]
            return format_ratio(statistics.median(per_repetition))

        rows = [[workload] + [ratio(name, workload) for name in others] for workload in WORKLOADS]
        lines += [
            "## %s relative to each contender" % baseline,
            "",
            "Median over the repetitions of (%s ops/s) / (contender ops/s): above 1 means "
            "%s is faster." % (baseline, baseline),
            "",
            markdown_table(["workload"] + ["vs %s" % name for name in others], rows),
            "",
        ]

    def reopen_cell(name):
        if name not in runs:
            return absent_cell(name)
        if runs[name][0]["reopen_seconds"] is None:
            return "n/a"
        return format_seconds(statistics.median(r["reopen_seconds"] for r in runs[name]))

    def reopen_ratio(baseline, name):
        if name == baseline:
            return ""
        if name not in runs or runs[name][0]["reopen_seconds"] is None:
            return reopen_cell(name)
        per_repetition = [
            theirs["reopen_seconds"] / mine["reopen_seconds"]
            for mine, theirs in zip(runs[baseline], runs[name])
        ]
        return format_ratio(statistics.median(per_repetition))

    rows = [["seconds"] + [reopen_cell(name) for name in CONTENDERS]]
    rows += [
        ["ratio to %s" % baseline] + [reopen_ratio(baseline, name) for name in CONTENDERS]
        for baseline in BASELINES
        if baseline in runs
    ]
    lines += [
        "## Reopen, seconds (median of %d; lower is better)" % args.repeat,
        "",
        "The time to open the db that fill_sequential wrote, take its length and look up "
        "one key, in a fresh process, with the file still in the page cache: `open()`, "
        "`len()` (`len(db.keys())` for semidbm 0.5.1, which has no `len()`) and `db[key]`; "
        "for lmdb, `lmdb.open()`, then one read transaction's `stat()[\"entries\"]` and "
        "`get(key)`. A dict has no file to reopen. A row \"ratio to X\" gives, for each "
        "contender, the median over the repetitions of (contender's seconds) / (X's "
        "seconds): above 1 means X reopens faster.",
        "",
        markdown_table([""] + CONTENDERS, rows),
        "",
    ]

    def memory_cell(name):
        if name not in runs:
            return absent_cell(name)
        return "{:.1f}".format(statistics.median(r["index_bytes_per_key"] for r in runs[name]))

    lines += [
        "## Index memory, bytes per key (median of %d)" % args.repeat,
        "",
        "The growth of the process's anonymous resident memory (RssAnon in "
        "/proc/self/status, read after `gc.collect()`) from just before the reopen above "
        "to just after it, divided by the number of keys; the data set was already in "
        "memory before the first reading. For the dict: the dict built from the data set "
        "(its table only, since the keys and values are the data set's). Pages mapped "
        "from a file (lmdb's whole tree, gdbm's and semidbm's mapped reads) are page "
        "cache, not anonymous memory, and are not counted.",
        "",
        markdown_table([""] + CONTENDERS, [["bytes per key"] + [memory_cell(n) for n in CONTENDERS]]),
        "",
    ]

    notes = []
    for name in CONTENDERS:
        # Each distinct note once, in the order the runs gave them.
        for note in dict.fromkeys(n for r in runs.get(name, []) for n in r["notes"]):
            notes.append("- %s: %s." % (name, note))
    if notes:
        lines += ["## Notes", ""] + notes + [""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(
        description="Run the classic dbm benchmark on semidbm and its rivals, side by side."
    )
    parser.add_argument("--keys", type=int, default=1_000_000, help="number of keys (1,000,000)")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions (5)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (100)")
    parser.add_argument("--key-size", type=int, default=16, help="bytes per key (16)")
    parser.add_argument(
        "--with-dumb",
        action="store_true",
        help="run dbm.dumb even above %s keys" % format_ops(DUMB_KEY_LIMIT),
    )
    parser.add_argument("--out", help="also write the Markdown report to this file")
    args = parser.parse_args()
    if args.keys < 1 or args.repeat < 1 or args.value_size < 0:
        parser.error("--keys and --repeat must be at least 1, --value-size at least 0")

    absent = {}
    if args.keys > DUMB_KEY_LIMIT and not args.with_dumb:
        absent["dbm.dumb"] = "not run: slow above %s keys (--with-dumb runs it)" % format_ops(
            DUMB_KEY_LIMIT
        )
    source_at_start = source_version()
    runs = {}
    for repetition in range(args.repeat):
        for name in CONTENDERS:
            if name in absent:
                continue
            result = run_worker(name, args, seed=repetition)
            if "missing" in result:
                absent[name] = "missing: " + result["missing"]
                print("%s: %s" % (name, absent[name]), file=sys.stderr)
                continue
            runs.setdefault(name, []).append(result)
            summary = ", ".join(
                "%s %s" % (workload, format_ops(result["ops_per_sec"][workload]))
                for workload in WORKLOADS
            )
            if result["reopen_seconds"] is not None:
                summary += ", reopen %s s" % format_seconds(result["reopen_seconds"])
            summary += ", index %.1f bytes/key" % result["index_bytes_per_key"]
            print(
                "repetition %d/%d, %s: %s" % (repetition + 1, args.repeat, name, summary),
                file=sys.stderr,
            )

    text = report(args, runs, absent, source_at_start)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
