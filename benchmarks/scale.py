"""The scale benchmark: the numbers 0 to N-1 as keys, their English words as values.

Usage (the nox session ``scale`` sets up its environment and runs this
with the arguments after ``--``)::

    bash scripts/nox.sh -s scale -- [--records N] [--gdbm-seconds S]
        [--reads R] [--cold] [--compact] [--dir DIR] [--keep] [--out FILE.md]

The data set is the one of a widely read account of GNU dbm at scale:
the key ``b"123456789"`` has the value ``b"one hundred twenty-three
million, four hundred fifty-six thousand, seven hundred eighty-nine"``
(``number_words.py``). gdbm took 21 h 43 min to load 125,000,000 such
records, its insert rate falling from about 175,000/s to under 1,000/s.

Phases, each in a fresh process (``_scale_worker.py``):

1. semidbm loads N records (default 2**20; the full run is
   ``--records 125000000``) into a new db, made in untimed chunks and
   set in a plain loop, noting at 2**17 records and every doubling after
   the load time so far, the records per second within that doubling
   (per second of wall time and of CPU time), the anonymous resident
   memory and the file size; then ``close()``
   (flush and fsync) is timed.
2. The db is reopened in a fresh process: ``open()``, ``len()`` and one
   lookup are timed (the index is rebuilt on open, eagerly), the growth
   of anonymous resident memory over the interpreter's baseline is the
   index memory, and R random keys (default 1,000,000) are read. With
   ``--cold``, a reopen from the disk is timed first, in a process of its
   own: the data file's pages are dropped from the page cache
   (``posix_fadvise``) before it.
3. With ``--compact``, the db is opened for writing and compacted, in a
   fresh process, with a progress callback that samples the anonymous
   resident memory (the data set has no dead records, so every record
   is copied: another file of the same size, for a moment).
4. The semidbm db is removed (unless ``--keep``), and ``dbm.gnu`` loads
   the same data until ``--gdbm-seconds`` of load time (default 60; 0
   skips it) have passed, for the early doublings.

The report (Markdown, on stdout and in ``--out``) gives the machine,
its load average around each phase (the machines are shared: other
work slows the figures), the table of doublings, the reopen and read
figures and the targets for 125,000,000 records on a 2-core, 24 GiB
machine with how this run compares. The databases go in ``--dir``
(default: the system's temporary directory); the full run needs about
12 GB there (24 GB with ``--compact``), and about 24 GiB of memory to
keep the file in the page cache beside the index.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile

from compare import cpu_model  # benchmarks/ is on sys.path when run as a script

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_scale_worker.py")

#: The targets, for 125,000,000 records.
TARGET_RECORDS = 125_000_000
TARGET_LOAD_SECONDS = 300
TARGET_RATE_RATIO = 0.70
TARGET_INDEX_BYTES = 32
TARGET_REOPEN_SECONDS = 60
TARGET_READS_PER_SECOND = 1_000_000

MIB = 1 << 20


def run_phase(name, arguments, notes):
    """Run the phase ``name`` in a fresh process; return its JSON result, noting the load."""
    before = os.getloadavg()[0]
    done = subprocess.run([sys.executable, WORKER] + arguments, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit("%s failed (exit status %d)" % (name, done.returncode))
    notes.append(
        "%s: load average (1 min) %.2f before, %.2f after" % (name, before, os.getloadavg()[0])
    )
    return json.loads(done.stdout)


def memory_total():
    """Return the machine's memory in bytes (MemTotal), or None."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def number(value):
    """Format a count with thousands separators."""
    return "{:,.0f}".format(value)


def mebibytes(value):
    """Format bytes as MiB with one decimal."""
    return "{:,.1f}".format(value / MIB)


def markdown_table(header, rows):
    """Return a Markdown table with all columns but the first right-aligned."""
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def doubling_rows(semidbm, gdbm):
    """The rows of the load table: one per doubling of semidbm, with gdbm's beside it."""
    theirs_by_mark = {row["mark"]: row for row in gdbm["rows"]} if gdbm else {}
    rows = []
    for row in semidbm["rows"]:
        cells = [
            number(row["records"]),
            "{:.2f}".format(row["seconds"]),
            number(row["rate"]),
            number(row["cpu_rate"]),
            mebibytes(row["anonymous_bytes"]),
            "{:.1f}".format(row["anonymous_bytes"] / row["records"]),
            mebibytes(row["file_bytes"]),
        ]
        theirs = theirs_by_mark.get(row["mark"])
        if theirs is not None:
            stopped = " (stopped at %s)" % number(theirs["records"]) if theirs["partial"] else ""
            cells += [
                "{:.2f}".format(theirs["seconds"]) + stopped,
                number(theirs["rate"]),
                mebibytes(theirs["file_bytes"]),
            ]
        elif gdbm:
            cells += ["", "", ""]
        rows.append(cells)
    return rows


def targets(args, semidbm, reopened):
    """The rows of the targets table: target, this run's figure, and whether it is met."""
    rows = semidbm["rows"]
    load_seconds = rows[-1]["seconds"] + semidbm["close_seconds"]
    ratio = rows[-1]["rate"] / rows[0]["rate"]
    index_bytes = reopened["index_bytes"] / reopened["count"]
    load_target = TARGET_LOAD_SECONDS * args.records / TARGET_RECORDS

    def verdict(met):
        return "yes" if met else "**no**"

    return [
        [
            "load time, inserts + close",
            "< {:,.1f} s".format(load_target),
            "{:.1f} s".format(load_seconds),
            verdict(load_seconds < load_target),
        ],
        [
            "records/s, last doubling / first",
            ">= %.2f" % TARGET_RATE_RATIO,
            "{:.2f}".format(ratio),
            verdict(ratio >= TARGET_RATE_RATIO),
        ],
        [
            "index memory after reopen",
            "<= %d bytes/key" % TARGET_INDEX_BYTES,
            "{:.1f} bytes/key".format(index_bytes),
            verdict(index_bytes <= TARGET_INDEX_BYTES),
        ],
        [
            "reopen: open(), len(), one lookup",
            "< %d s" % TARGET_REOPEN_SECONDS,
            "{:.2f} s".format(reopened["seconds"]),
            verdict(reopened["seconds"] < TARGET_REOPEN_SECONDS),
        ],
        [
            "random reads",
            ">= %s/s" % number(TARGET_READS_PER_SECOND),
            "%s/s" % number(reopened["reads_per_second"]),
            verdict(reopened["reads_per_second"] >= TARGET_READS_PER_SECOND),
        ],
    ]


def compaction_lines(compacted):
    """The report's section on the compaction, or nothing if it did not run."""
    if compacted is None:
        return []
    return [
        "## Compaction",
        "",
        "In a fresh process: `semidbm.open(path, 'w')` (the index rebuilt), then "
        "`compact(progress=...)`, whose callback read the anonymous resident memory at "
        "each of its calls; the growth is over the memory held once the db was open.",
        "",
        markdown_table(
            ["open s", "compact s", "progress calls", "memory growth while copying MiB",
             "file MiB before", "file MiB after"],
            [
                [
                    "{:.2f}".format(compacted["open_seconds"]),
                    "{:.2f}".format(compacted["seconds"]),
                    number(compacted["progress_calls"]),
                    mebibytes(compacted["peak_copy_bytes"]),
                    mebibytes(compacted["file_bytes_before"]),
                    mebibytes(compacted["file_bytes_after"]),
                ]
            ],
        ),
        "",
    ]


def report(args, directory, semidbm, reopened, compacted, gdbm, notes):
    """Return the Markdown report."""
    memory = memory_total()
    rows = semidbm["rows"]
    lines = [
        "# Scale benchmark: %s records" % number(args.records),
        "",
        "- Command: `%s` (in `%s`)" % (shlex.join(sys.orig_argv), os.getcwd()),
        "- Date: %s" % datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "- Machine: %s, %d CPUs, %s of memory, %s"
        % (
            cpu_model(),
            os.cpu_count(),
            "{:.1f} GiB".format(memory / (1 << 30)) if memory else "unknown amount",
            platform.platform(),
        ),
        "- Python %s; semidbm on its %s kernel; databases in %s"
        % (platform.python_version(), reopened["implementation"], directory),
        "- Data: keys `0` to `%d` as ASCII decimal bytes, values their American English "
        "words; made in chunks outside the timed part, set with `db[key] = value` in a "
        "plain loop" % (args.records - 1),
        "",
        "## Load, at every doubling",
        "",
        "Load time is the time spent setting records, cumulative; records/s is within the "
        "doubling that ends at that row, and records/CPU s the same per second of the "
        "loading process's CPU time (user + system), which other work on the machine "
        "disturbs less. Memory is the loading process's anonymous "
        "resident memory (RssAnon) above what it held with the empty db open; the file "
        "is the data file's size (semidbm's last megabyte may still be in its buffer).",
        "",
    ]
    header = [
        "records", "load s", "records/s", "records/CPU s", "anon MiB", "anon bytes/record",
        "file MiB",
    ]
    if gdbm:
        header += ["dbm.gnu load s", "dbm.gnu records/s", "dbm.gnu file MiB"]
    lines += [markdown_table(header, doubling_rows(semidbm, gdbm)), ""]
    load_total = rows[-1]["seconds"] + semidbm["close_seconds"]
    lines += [
        "- semidbm: `close()` (flush and fsync) took %.2f s; load time with it: %.1f s "
        "(%s records/s overall); data file %s MiB."
        % (
            semidbm["close_seconds"],
            load_total,
            number(rows[-1]["records"] / load_total),
            mebibytes(semidbm["file_bytes"]),
        )
    ]
    if gdbm:
        last = gdbm["rows"][-1]
        if last["partial"]:
            lines.append(
                "- dbm.gnu: stopped at the time limit of %g s of load time, after %s records "
                "(%s records/s in its last, partial doubling)."
                % (args.gdbm_seconds, number(last["records"]), number(last["rate"]))
            )
        else:
            lines.append(
                "- dbm.gnu: loaded all %s records in %.1f s; `close()` took %.2f s."
                % (number(last["records"]), last["seconds"], gdbm["close_seconds"])
            )
    else:
        lines.append("- dbm.gnu: not run (`--gdbm-seconds 0`).")
    lines += [
        "",
        "## Reopen and random reads",
        "",
        "In a fresh process: `semidbm.open(path, 'r')`, `len(db)` and one lookup, timed "
        "(the index is rebuilt from the log on open), with the data file in the page cache; "
        "a cold reopen is the same after its pages were dropped from the cache, so that it "
        "is read from the disk; index memory is the growth of "
        "anonymous resident memory over the interpreter's baseline, per key; then %s "
        "random keys read in a plain loop, and a sample of values checked." % number(args.reads),
        "",
        markdown_table(
            ["reopen s", "cold reopen s", "index bytes/key", "index MiB", "random reads/s"],
            [
                [
                    "{:.2f}".format(reopened["seconds"]),
                    "not run (--cold)" if reopened["cold_seconds"] is None
                    else "{:.2f}".format(reopened["cold_seconds"]),
                    "{:.1f}".format(reopened["index_bytes"] / reopened["count"]),
                    mebibytes(reopened["index_bytes"]),
                    number(reopened["reads_per_second"]),
                ]
            ],
        ),
        "",
    ]
    lines += compaction_lines(compacted)
    lines += [
        "## Targets",
        "",
        "Set for %s records on a 2-core, 24 GiB machine: all of them loaded in under "
        "%d s; on another count the load time target is scaled to it."
        % (number(TARGET_RECORDS), TARGET_LOAD_SECONDS),
        "",
        markdown_table(["", "target", "this run", "met"], targets(args, semidbm, reopened)),
        "",
        "## Notes",
        "",
    ]
    lines += ["- %s" % note for note in notes]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(
        description="Load the numbers 0 to N-1 with their English words into semidbm (and dbm.gnu)."
    )
    parser.add_argument("--records", type=int, default=1 << 20, help="records to load (2**20)")
    parser.add_argument(
        "--gdbm-seconds",
        type=float,
        default=60,
        help="load time after which dbm.gnu is stopped (60); 0 skips it",
    )
    parser.add_argument("--reads", type=int, default=1_000_000, help="random reads (1,000,000)")
    parser.add_argument("--compact", action="store_true", help="also time a compaction")
    parser.add_argument(
        "--cold", action="store_true", help="also time a reopen with the file out of the page cache"
    )
    parser.add_argument("--dir", help="where the databases go (a new directory is made inside)")
    parser.add_argument("--keep", action="store_true", help="keep the semidbm db afterwards")
    parser.add_argument("--out", help="also write the Markdown report to this file")
    args = parser.parse_args()
    if args.records < 1 << 17 or args.reads < 1 or args.gdbm_seconds < 0:
        parser.error("--records must be at least 2**17, --reads at least 1, --gdbm-seconds >= 0")

    directory = tempfile.mkdtemp(prefix="semidbm-scale-", dir=args.dir)
    notes = []
    try:
        path = os.path.join(directory, "semidbm.db")
        load_arguments = ["load", "semidbm", "--records", str(args.records), "--path", path]
        semidbm = run_phase("semidbm load", load_arguments, notes)
        reopen_arguments = ["reopen", "--records", str(args.records), "--path", path]
        cold = None
        if args.cold:
            cold = run_phase("semidbm cold reopen", reopen_arguments + ["--cold"], notes)
        reopened = run_phase(
            "semidbm reopen and reads", reopen_arguments + ["--reads", str(args.reads)], notes
        )
        reopened["cold_seconds"] = cold["seconds"] if cold else None
        compacted = None
        if args.compact:
            compacted = run_phase(
                "semidbm compaction",
                ["compact", "--records", str(args.records), "--path", path],
                notes,
            )
        if not args.keep:
            shutil.rmtree(path)
        gdbm = None
        if args.gdbm_seconds:
            gdbm_path = os.path.join(directory, "gdbm.db")
            gdbm = run_phase(
                "dbm.gnu load",
                [
                    "load", "dbm.gnu",
                    "--records", str(args.records),
                    "--path", gdbm_path,
                    "--seconds", str(args.gdbm_seconds),
                ],
                notes,
            )
            os.remove(gdbm_path)
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    if args.keep:
        notes.append("the semidbm db was kept in %s" % path)
    text = report(args, directory, semidbm, reopened, compacted, gdbm, notes)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
