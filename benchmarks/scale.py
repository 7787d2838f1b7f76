"""The scale benchmark: the numbers 0 to N-1 as keys, their English words as values.

Usage (the nox session ``scale`` sets up its environment and runs this
with the arguments after ``--``)::

    bash scripts/nox.sh -s scale -- [--records N] [--gdbm-seconds S]
        [--reads R] [--repeats K] [--cold] [--compact] [--dir DIR] [--keep]
        [--out FILE.md]

The data set is the one of a widely read account of GNU dbm at scale:
the key ``b"123456789"`` has the value ``b"one hundred twenty-three
million, four hundred fifty-six thousand, seven hundred eighty-nine"``
(``_number_words.py``). gdbm took 21 h 43 min to load 125,000,000 such
records, its insert rate falling from about 175,000/s to under 1,000/s.

Phases, each measurement in a fresh process (``_scale_worker.py``):

1. semidbm loads N records (default 2**20; the full run is
   ``--records 125000000``) into a new db, made in untimed chunks and
   set in a plain loop, noting at 2**17 records and every doubling after
   the load time so far, the records per second within that doubling
   (per second of wall time and of CPU time), the anonymous resident
   memory and the file size; then ``close()`` (flush, fsync and the
   writing of the index file) is timed, and the index file's size noted.
2. With ``--cold``, K rounds (``--repeats``, default 5) of a reader's and
   a writer's open from the disk: every file of the db, ``data`` and
   ``index``, is dropped from the page cache (``_pagecache``,
   ``posix_fadvise``), then ``open()``, ``len()`` and one lookup are
   timed, and how much of each file the cache held before and after is
   read (``mincore``).
3. The db's files are read through, untimed, so that the page cache
   holds them all (after a cold phase nothing else would bring them back).
4. K rounds, each of: a reader's ``open(path, 'r')``, ``len()`` and one
   lookup, timed, and the growth of its anonymous memory
   (``/proc/self/smaps_rollup``) over the interpreter's baseline; the
   same for a writer (``'w'``); ``python -m semidbm get DB KEY`` and, for
   comparison, ``python -m semidbm --version``, each as a whole command in
   a subprocess; one reader's R random reads (default 1,000,000), every
   answer checked against ``number_words``; four readers started at the
   same moment (they wait on a pipe until all have made their keys),
   each timing its own open and its R random reads, every answer
   checked, and noting the time every 4,096 reads, so that their
   combined rate while all four were reading can be told (skipped when
   four readers' private memory would not fit beside the cached files);
   and a writer's ``open(path, 'w')``, one set (a key to its own words,
   so the data set stays the same) and ``close()``. The figures quoted
   are the medians over the rounds, the four readers' against one
   reader's as the median of the per-round ratios: the machines are
   shared, and one measurement can move by 2x.
5. With ``--compact``, the db is opened for writing and compacted, in a
   fresh process, with a progress callback that samples the anonymous
   resident memory (the data set holds only the dead records of the
   writer's sets, so nearly every record is copied: another file of
   the same size, for a moment).
6. The semidbm db is removed (unless ``--keep``), and ``dbm.gnu`` loads
   the same data until ``--gdbm-seconds`` of load time (default 60; 0
   skips it) have passed, for the early doublings.

The report (Markdown, on stdout and in ``--out``) gives the machine,
its load average around each phase (the machines are shared: other
work slows the figures), the table of doublings, the open, command-line,
write and read figures, and the targets for 125,000,000 records on a
2-core, 24 GiB machine, each with this run's figure and whether it is
met. The databases go in ``--dir`` (default: the system's temporary
directory); the full run needs about 14 GB there (26 GB with
``--compact``), and about 24 GiB of memory to keep the files in the page
cache.
"""

import argparse
import json
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from time import perf_counter

# benchmarks/ is on sys.path when run as a script
import _pagecache
from _number_words import number_words
from _provenance import cpu_model, filesystem_type, quoted_command, run_date
from _report import format_number, markdown_table, verdict

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_scale_worker.py")

#: The targets, for 125,000,000 records on a 2-core, 24 GiB machine. The
#: load and close times are scaled to the records of a run; the others
#: hold at any count.
TARGET_RECORDS = 125_000_000
TARGET_LOAD_SECONDS = 300
TARGET_RATE_RATIO = 0.70
TARGET_CLOSE_SECONDS = 15
TARGET_OPEN_SECONDS = 0.050
TARGET_COLD_OPEN_SECONDS = 1.0
TARGET_GET_SECONDS = 0.5
TARGET_WRITE_SECONDS = 1.0
TARGET_INDEX_BYTES = 20
TARGET_READER_MEMORY = 64 << 20
TARGET_READS_PER_SECOND = 1_000_000
TARGET_READERS_RATIO = 1.5

#: Readers started together in each round.
READERS = 4
#: Reads between a reader's notes of the time (``_scale_worker.READ_CHUNK``).
READ_CHUNK = 1 << 12
MIB = 1 << 20


def note_load(name, notes, before):
    """Note the load average (1 min) before a phase and now, after it."""
    notes.append(
        "%s: load average (1 min) %.2f before, %.2f after" % (name, before, os.getloadavg()[0])
    )


def run_phase(name, arguments):
    """Run the worker phase ``name`` in a fresh process; return its JSON result."""
    done = subprocess.run([sys.executable, WORKER] + arguments, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit("%s failed (exit status %d)" % (name, done.returncode))
    return json.loads(done.stdout)


def run_readers(arguments, seeds):
    """Run one ``read`` worker per seed, all starting at the same moment; return their results.

    Each child gets the read end of a pipe and prints ``ready`` once it
    has made its keys; when all have, the parent closes the write end,
    which every child is waiting to see end, so that all open the db and
    read at once.
    """
    go_read, go_write = os.pipe()
    children = []
    try:
        for seed in seeds:
            command = [sys.executable, WORKER, "read"] + arguments
            command += ["--seed", str(seed), "--go-fd", str(go_read)]
            children.append(
                subprocess.Popen(command, stdout=subprocess.PIPE, text=True, pass_fds=(go_read,))
            )
        for child in children:
            if child.stdout.readline() != "ready\n":
                sys.exit("a reader failed before it was ready (exit status %s)" % child.wait())
        os.close(go_write)
        go_write = None
        results = []
        for child in children:
            output = child.stdout.read()
            if child.wait() != 0:
                sys.exit("a reader failed (exit status %d)" % child.returncode)
            results.append(json.loads(output))
        return results
    finally:
        os.close(go_read)
        if go_write is not None:
            os.close(go_write)
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
            child.stdout.close()


def time_command(arguments, check):
    """Run ``python -m semidbm ARGUMENTS`` in a subprocess; return its wall time in seconds.

    ``check`` is given the command's standard output and says whether it
    is right; the benchmark stops if not, or if the command fails.
    """
    command = [sys.executable, "-m", "semidbm"] + arguments
    began = perf_counter()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seconds = perf_counter() - began
    if done.returncode != 0 or not check(done.stdout):
        sys.exit(
            "%s failed (exit status %d): %r" % (shlex.join(command), done.returncode, done.stderr)
        )
    return seconds


def meminfo(field):
    """Return the field of /proc/meminfo (MemTotal, MemAvailable) in bytes, or None."""
    try:
        with open("/proc/meminfo") as lines:
            for line in lines:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def readers_fit(one, directory_bytes):
    """Return None if ``READERS`` readers fit in memory now, else why not.

    Each reader holds what one reader held at the end of its reads (its
    keys, their expected values and whatever private index it built);
    they must fit in the available memory beside the db's files, which
    must stay in the page cache for the reads to be fair.
    """
    available = meminfo("MemAvailable")
    if available is None:
        return None
    needed = READERS * one["anonymous_total"]
    if needed <= available - directory_bytes:
        return None
    return (
        "%d readers skipped: they would need %s MiB of private memory, %s MiB is "
        "available beside the db's %s MiB of files"
        % (
            READERS,
            mebibytes(needed),
            mebibytes(available - directory_bytes),
            mebibytes(directory_bytes),
        )
    )


def mebibytes(value):
    """Format bytes as MiB with one decimal."""
    return "{:,.1f}".format(value / MIB)


def kibibytes(value):
    """Format bytes as KiB, whole."""
    return "{:,.0f}".format(value / 1024)


def memory_size(value):
    """Format bytes as KiB below a mebibyte, as MiB from there."""
    if abs(value) < MIB:
        return "%s KiB" % kibibytes(value)
    return "%s MiB" % mebibytes(value)


def duration(seconds):
    """Format a time: milliseconds below a second, seconds above."""
    if seconds < 1:
        return "{:.1f} ms".format(seconds * 1000)
    return "{:,.2f} s".format(seconds)


def doubling_rows(semidbm, gdbm):
    """The rows of the load table: one per doubling of semidbm, with gdbm's beside it."""
    theirs_by_mark = {row["mark"]: row for row in gdbm["rows"]} if gdbm else {}
    rows = []
    for row in semidbm["rows"]:
        cells = [
            format_number(row["records"]),
            "{:.2f}".format(row["seconds"]),
            format_number(row["rate"]),
            format_number(row["cpu_rate"]),
            mebibytes(row["anonymous_bytes"]),
            "{:.1f}".format(row["anonymous_bytes"] / row["records"]),
            mebibytes(row["file_bytes"]),
        ]
        theirs = theirs_by_mark.get(row["mark"])
        if theirs is not None:
            stopped = (
                " (stopped at %s)" % format_number(theirs["records"]) if theirs["partial"] else ""
            )
            cells += [
                "{:.2f}".format(theirs["seconds"]) + stopped,
                format_number(theirs["rate"]),
                mebibytes(theirs["file_bytes"]),
            ]
        elif gdbm:
            cells += ["", "", ""]
        rows.append(cells)
    return rows


class Figures:
    """The figures of the rounds, summed up as the report and its targets quote them."""

    def __init__(self, args, semidbm, cold, rounds):
        self.records = args.records
        self.semidbm = semidbm
        self.cold = cold
        self.rounds = rounds

    def command_times(self, name):
        """The wall times of the command ``name`` (``get``, ``version``) in every round."""
        return [round_[name] for round_ in self.rounds]

    def write_times(self):
        """The seconds of every round's writer: open, one set, close."""
        return [round_["write"]["seconds"] for round_ in self.rounds]

    def open_times(self, mode):
        """The seconds of every round's warm open with ``mode``."""
        return [round_["open_" + mode]["seconds"] for round_ in self.rounds]

    def cold_times(self, mode):
        """The seconds of every cold open with ``mode`` (empty without ``--cold``)."""
        return [result["seconds"] for result in self.cold if result["mode"] == mode]

    def reader_memory(self):
        """The largest growth of a reader's anonymous memory by its open, over the rounds."""
        return max(round_["open_r"]["anonymous_bytes"] for round_ in self.rounds)

    def index_bytes(self):
        """The index file's size after the load, or None if the kernel wrote none."""
        return self.semidbm["index_bytes"]

    def one_rates(self):
        """One reader's random reads per second in every round."""
        return [round_["one"]["reads_per_second"] for round_ in self.rounds]

    def span(self, readers):
        """Return the seconds from the first reader's start to the last one's end, and the share
        of them in which all of the readers were reading."""
        began = [reader["stamps"][0][0] for reader in readers]
        ended = [reader["stamps"][-1][0] for reader in readers]
        span = max(ended) - min(began)
        return span, max(min(ended) - max(began), 0) / span

    def overall(self, readers):
        """All the readers' reads over the time from the first one's start to the last one's end."""
        return sum(reader["reads"] for reader in readers) / self.span(readers)[0]

    def together(self, readers):
        """The readers' combined reads per second while all of them were reading, or None.

        Between a reader's notes of the time its reads are taken as
        evenly spread; None if the readers never all read at once.
        """
        start = max(reader["stamps"][0][0] for reader in readers)
        end = min(reader["stamps"][-1][0] for reader in readers)
        if end <= start:
            return None
        done = sum(reads_by(r["stamps"], end) - reads_by(r["stamps"], start) for r in readers)
        return done / (end - start)

    def ratios(self):
        """Per round where the readers read together: that rate over one reader's in the round."""
        ratios = []
        for round_ in self.rounds:
            together = self.together(round_["readers"]) if round_["readers"] else None
            if together is not None:
                ratios.append(together / round_["one"]["reads_per_second"])
        return ratios


def reads_by(stamps, moment):
    """The reads a reader had done at ``moment``, from its notes ``[time, reads done]``.

    Linear between two notes; the first note's count before it, the last one's after it.
    """
    for (time_before, done_before), (time_after, done_after) in zip(stamps, stamps[1:]):
        if moment <= time_after:
            if moment <= time_before:
                return done_before
            share = (moment - time_before) / max(time_after - time_before, 1e-9)
            return done_before + (done_after - done_before) * share
    return stamps[-1][1]


def spread(times):
    """The median of ``times`` (seconds), then the fastest and slowest, as three cells."""
    return [duration(statistics.median(times)), duration(min(times)), duration(max(times))]


def target_rows(figures):
    """The rows of the targets table: what, target, this run's figure, and whether it is met."""
    rows = figures.semidbm["rows"]
    scale = figures.records / TARGET_RECORDS
    load_seconds = rows[-1]["seconds"] + figures.semidbm["close_seconds"]
    load_target = TARGET_LOAD_SECONDS * scale
    close_seconds = figures.semidbm["close_seconds"]
    close_target = TARGET_CLOSE_SECONDS * scale
    ratio = rows[-1]["rate"] / rows[0]["rate"]
    table = [
        [
            "load time, inserts + close",
            "< %s" % duration(load_target),
            duration(load_seconds),
            verdict(load_seconds < load_target),
        ],
        [
            "records/s, last doubling / first",
            ">= %.2f" % TARGET_RATE_RATIO,
            "{:.2f}".format(ratio),
            verdict(ratio >= TARGET_RATE_RATIO),
        ],
        [
            "`close()` after the load (flush, fsync, index file)",
            "< %s" % duration(close_target),
            duration(close_seconds),
            verdict(close_seconds < close_target),
        ],
    ]
    for mode, who in (("r", "reader"), ("w", "writer")):
        seconds = statistics.median(figures.open_times(mode))
        table.append(
            [
                "%s: `open(path, '%s')`, `len()`, one lookup, page cache (median)" % (who, mode),
                "< %s" % duration(TARGET_OPEN_SECONDS),
                duration(seconds),
                verdict(seconds < TARGET_OPEN_SECONDS),
            ]
        )
    for mode, who in (("r", "reader"), ("w", "writer")):
        times = figures.cold_times(mode)
        what = "%s: the same from the disk (median)" % who
        target = "< %s" % duration(TARGET_COLD_OPEN_SECONDS)
        if times:
            seconds = statistics.median(times)
            table.append(
                [what, target, duration(seconds), verdict(seconds < TARGET_COLD_OPEN_SECONDS)]
            )
        else:
            table.append([what, target, "not measured (`--cold`)", "**no**: not measured"])
    get = statistics.median(figures.command_times("get"))
    write = statistics.median(figures.write_times())
    table += [
        [
            "`python -m semidbm get DB KEY`, whole command (median)",
            "< %s" % duration(TARGET_GET_SECONDS),
            duration(get),
            verdict(get < TARGET_GET_SECONDS),
        ],
        [
            "writer: `open(path, 'w')`, one set, `close()` (median)",
            "< %s" % duration(TARGET_WRITE_SECONDS),
            duration(write),
            verdict(write < TARGET_WRITE_SECONDS),
        ],
    ]
    index_bytes = figures.index_bytes()
    if index_bytes is None:
        table.append(
            ["index file", "<= %d bytes/key" % TARGET_INDEX_BYTES, "no index file", "**no**"]
        )
    else:
        per_key = index_bytes / figures.records
        table.append(
            [
                "index file",
                "<= %d bytes/key" % TARGET_INDEX_BYTES,
                "{:.1f} bytes/key".format(per_key),
                verdict(per_key <= TARGET_INDEX_BYTES),
            ]
        )
    memory = figures.reader_memory()
    table.append(
        [
            "reader's anonymous memory after its open (largest)",
            "< %s" % memory_size(TARGET_READER_MEMORY),
            memory_size(memory),
            verdict(memory < TARGET_READER_MEMORY),
        ]
    )
    rate = statistics.median(figures.one_rates())
    table.append(
        [
            "random reads, one reader (median)",
            ">= %s/s" % format_number(TARGET_READS_PER_SECOND),
            "%s/s" % format_number(rate),
            verdict(rate >= TARGET_READS_PER_SECOND),
        ]
    )
    ratios = figures.ratios()
    what = "random reads, %d readers at once / one reader (median)" % READERS
    if ratios:
        ratio = statistics.median(ratios)
        table.append(
            [
                what,
                ">= %.1f" % TARGET_READERS_RATIO,
                "{:.2f}".format(ratio),
                verdict(ratio >= TARGET_READERS_RATIO),
            ]
        )
    else:
        table.append(
            [
                what,
                ">= %.1f" % TARGET_READERS_RATIO,
                "not measured (memory)",
                "**no**: not measured",
            ]
        )
    return table


def cache_lines(cold):
    """What the page cache held of the db's files around the opens from the disk."""
    if not cold:
        return []

    def held(results, when, name):
        values = [r[when][name][0] for r in results if r[when][name] is not None]
        return [value for value in values if value is not None]

    lines = []
    for name in ("data", "index"):
        sizes = [r["cache_before"][name][1] for r in cold if r["cache_before"][name] is not None]
        if not sizes:
            lines.append("- `%s`: no such file." % name)
            continue
        before = held(cold, "cache_before", name)
        after = held(cold, "cache_after", name)
        if not before:
            lines.append(
                "- `%s` (%s MiB): what the cache held is unknown here."
                % (name, mebibytes(max(sizes)))
            )
            continue
        read = [a - b for a, b in zip(after, before)]
        lines.append(
            "- `%s` (%s MiB): at most %s KiB in the page cache before an open; the open and "
            "its lookup brought in %s KiB (median; %s to %s)."
            % (
                name,
                mebibytes(max(sizes)),
                kibibytes(max(before)),
                kibibytes(statistics.median(read)),
                kibibytes(min(read)),
                kibibytes(max(read)),
            )
        )
    return lines


def open_lines(args, figures, warmup):
    """The report's section on the opens, the command line and the writer, in fresh processes."""
    rows = []
    for mode, who in (("r", "reader"), ("w", "writer")):
        rows.append(
            ["%s: `open(path, '%s')`, `len()`, one lookup, page cache" % (who, mode)]
            + spread(figures.open_times(mode))
        )
    for mode, who in (("r", "reader"), ("w", "writer")):
        times = figures.cold_times(mode)
        if times:
            rows.append(["%s: the same, from the disk" % who] + spread(times))
    rows += [
        ["`python -m semidbm get DB KEY`, whole command"] + spread(figures.command_times("get")),
        ["`python -m semidbm --version`, whole command (start and imports)"]
        + spread(figures.command_times("version")),
        ["writer: `open(path, 'w')`, one set, `close()`"] + spread(figures.write_times()),
    ]
    rewritten = sum(round_["write"]["index_rewritten"] for round_ in figures.rounds)
    opened = [round_["open_r"] for round_ in figures.rounds]
    memory = figures.reader_memory()
    lines = [
        "## Opening, the command line and a small write",
        "",
        "Each in a fresh process, %d rounds (`--repeats`). %sThe db's files were read "
        "through, untimed (%s MiB in %s), so that the page cache held %s for the rest, "
        "which ran interleaved with the reads below. The opens are timed inside the "
        "process, from `semidbm.open` to the answer of the lookup (a random key), after "
        "`import semidbm`; the commands from before the subprocess starts to its end."
        % (
            args.repeats,
            "The opens from the disk ran first, each after every file of the db (`data`, "
            "`index`) was dropped from the page cache. "
            if figures.cold
            else "",
            mebibytes(warmup["bytes"]),
            duration(warmup["seconds"]),
            warm_summary(warmup["state"]),
        ),
        "",
        markdown_table(["", "median", "fastest", "slowest"], rows),
        "",
        "- A reader's anonymous memory (`Anonymous:` of `/proc/self/smaps_rollup`) grew by "
        "%s at most with its open (%.1f bytes/key); its resident memory, mapped file "
        "pages included, by %s at most."
        % (
            memory_size(memory),
            memory / figures.records,
            memory_size(max(o["rss_bytes"] for o in opened)),
        ),
        "- The writer's `close()` after one set wrote a new index file in %d of %d rounds."
        % (rewritten, len(figures.rounds)),
    ]
    if figures.cold:
        lines.append("- Opens from the disk (%d rounds each):" % args.repeats)
        lines += ["  " + line for line in cache_lines(figures.cold)]
    return lines + [""]


def warm_summary(state):
    """Say how much of ``data`` and ``index`` the page cache held, from a cache state."""
    parts = []
    for name in ("data", "index"):
        entry = state.get(name)
        if entry is None:
            parts.append("no `%s` file" % name)
        elif entry[0] is None:
            parts.append("`%s`: unknown" % name)
        else:
            share = min(entry[0], entry[1]) / max(entry[1], 1)
            parts.append("%.0f%% of `%s`" % (100 * share, name))
    return " and ".join(parts)


def read_lines(args, figures):
    """The report's section on random reads: one reader, then four at once, per round."""
    rows = []
    for number_of_round, round_ in enumerate(figures.rounds, 1):
        one = round_["one"]
        cells = [
            str(number_of_round),
            format_number(one["reads_per_second"]),
            format_number(one["reads_per_cpu_second"]),
            duration(one["open_seconds"]),
        ]
        readers = round_["readers"]
        together = figures.together(readers) if readers else None
        if readers:
            span, overlap = figures.span(readers)
            cells += [
                " / ".join(format_number(r["reads_per_second"]) for r in readers),
                format_number(statistics.mean(r["reads_per_cpu_second"] for r in readers)),
                " / ".join(duration(r["open_seconds"]) for r in readers),
                "not at once" if together is None else format_number(together),
                format_number(figures.overall(readers)),
                "{:.0f}% of {}".format(100 * overlap, duration(span)),
                "" if together is None else "{:.2f}".format(together / one["reads_per_second"]),
            ]
        else:
            cells += ["not run", "", "", "", "", "", ""]
        rows.append(cells)
    ratios = figures.ratios()
    rows.append(
        [
            "median",
            format_number(statistics.median(figures.one_rates())),
            format_number(
                statistics.median(r["one"]["reads_per_cpu_second"] for r in figures.rounds)
            ),
            duration(statistics.median(r["one"]["open_seconds"] for r in figures.rounds)),
            "",
            "",
            "",
            "",
            "",
            "",
            "{:.2f}".format(statistics.median(ratios)) if ratios else "",
        ]
    )
    growth = max(r["one"]["read_anonymous_bytes"] for r in figures.rounds)
    return [
        "## Random reads",
        "",
        "Each reader, in a fresh process, draws %s random keys and makes the words expected "
        "for each (untimed), then times `open(path, 'r')`, `len()` and one lookup, and the "
        "reads in a plain loop that compares every answer with the expected words; a wrong "
        "answer fails the benchmark. The %d readers are started together: each waits on a "
        "pipe until all have made their keys. Each notes the time after every %s reads; "
        "*together* is their combined rate while all %d were reading (the reads each did "
        "in that time, interpolated between its notes), *overall* all their reads over the "
        "time from the first one's start to the last one's end, and overlap the share of "
        "that time in which all were reading. The ratio is the rate together over one "
        "reader's rate in the same round. Reads per CPU second leave out the time a reader "
        "waited for a CPU: readers that slowed each other down (a lock, the memory bus) "
        "would show fewer with four at once than with one. On a machine shared with other "
        "work one reader may get less than a whole CPU where four get a larger share "
        "together, so that the ratio can pass the number of CPUs."
        % (format_number(args.reads), READERS, format_number(READ_CHUNK), READERS),
        "",
        markdown_table(
            ["round", "one reader reads/s", "reads/CPU s", "open",
             "%d readers, each reads/s" % READERS, "reads/CPU s, mean", "each open",
             "together reads/s",
             "overall reads/s", "overlap", "together / one"],
            rows,
        ),
        "",
        "- A reader's anonymous memory grew by at most %s during its reads (after its "
        "open)." % memory_size(max(growth, 0)),
        "",
    ]


def compaction_lines(compacted):
    """The report's section on the compaction, or nothing if it did not run."""
    if compacted is None:
        return []
    index_after = compacted["index_bytes_after"]
    return [
        "## Compaction",
        "",
        "In a fresh process: `semidbm.open(path, 'w')`, then "
        "`compact(progress=...)`, whose callback read the anonymous resident memory at "
        "each of its calls; the growth is over the memory held once the db was open.",
        "",
        markdown_table(
            ["open s", "compact s", "progress calls", "memory growth while copying MiB",
             "file MiB before", "file MiB after", "index file MiB after"],
            [
                [
                    "{:.2f}".format(compacted["open_seconds"]),
                    "{:.2f}".format(compacted["seconds"]),
                    format_number(compacted["progress_calls"]),
                    mebibytes(compacted["peak_copy_bytes"]),
                    mebibytes(compacted["file_bytes_before"]),
                    mebibytes(compacted["file_bytes_after"]),
                    "none" if index_after is None else mebibytes(index_after),
                ]
            ],
        ),
        "",
    ]


def load_lines(args, semidbm, gdbm):
    """The report's section on the load: the table of doublings, the close and the index file."""
    rows = semidbm["rows"]
    lines = [
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
    index_bytes = semidbm["index_bytes"]
    lines += [
        "- semidbm: `close()` (flush, fsync and the index file) took %.2f s; load time with "
        "it: %.1f s (%s records/s overall); data file %s MiB; %s."
        % (
            semidbm["close_seconds"],
            load_total,
            format_number(rows[-1]["records"] / load_total),
            mebibytes(semidbm["file_bytes"]),
            "no index file written"
            if index_bytes is None
            else "index file %s MiB (%.1f bytes/key)"
            % (mebibytes(index_bytes), index_bytes / args.records),
        )
    ]
    if gdbm:
        last = gdbm["rows"][-1]
        if last["partial"]:
            lines.append(
                "- dbm.gnu: stopped at the time limit of %g s of load time, after %s records "
                "(%s records/s in its last, partial doubling)."
                % (args.gdbm_seconds, format_number(last["records"]), format_number(last["rate"]))
            )
        else:
            lines.append(
                "- dbm.gnu: loaded all %s records in %.1f s; `close()` took %.2f s."
                % (format_number(last["records"]), last["seconds"], gdbm["close_seconds"])
            )
    else:
        lines.append("- dbm.gnu: not run (`--gdbm-seconds 0`).")
    return lines + [""]


def report(args, directory, results, notes):
    """Return the Markdown report."""
    figures = Figures(args, results["semidbm"], results["cold"], results["rounds"])
    memory = meminfo("MemTotal")
    lines = [
        "# Scale benchmark: %s records" % format_number(args.records),
        "",
        "- Command, from the repository's top directory: `%s`" % quoted_command(),
        "- Date: %s" % run_date(),
        "- Machine: %s, %d CPUs, %s of memory, %s"
        % (
            cpu_model(),
            os.cpu_count(),
            "{:.1f} GiB".format(memory / (1 << 30)) if memory else "unknown amount",
            platform.platform(),
        ),
        "- Python %s; semidbm on its %s kernel; databases in %s (%s)"
        % (
            platform.python_version(),
            results["rounds"][0]["open_r"]["implementation"],
            directory,
            filesystem_type(directory),
        ),
        "- Data: keys `0` to `%d` as ASCII decimal bytes, values their American English "
        "words; made in chunks outside the timed part, set with `db[key] = value` in a "
        "plain loop" % (args.records - 1),
        "",
    ]
    lines += load_lines(args, results["semidbm"], results["gdbm"])
    lines += open_lines(args, figures, results["warmup"])
    lines += read_lines(args, figures)
    lines += compaction_lines(results["compacted"])
    lines += [
        "## Targets",
        "",
        "Set for %s records on a 2-core, 24 GiB machine; on another count the load and "
        "close time targets are scaled to it, the others hold as they are. Times are the "
        "medians over the rounds, memory the largest." % format_number(TARGET_RECORDS),
        "",
        markdown_table(["", "target", "this run", "met"], target_rows(figures)),
        "",
        "## Notes",
        "",
    ]
    lines += ["- %s" % note for note in notes]
    return "\n".join(lines) + "\n"


def measure_round(args, path, round_number, notes):
    """One round of the fresh-process measurements on the filled db (phase 4 of the docstring)."""
    common = ["--records", str(args.records), "--path", path]
    seed = str(round_number)
    key_number = random.Random(round_number).randrange(args.records)
    expected = number_words(key_number).encode("ascii")
    result = {
        "open_r": run_phase("reader open", ["open"] + common + ["--mode", "r", "--seed", seed]),
        "open_w": run_phase("writer open", ["open"] + common + ["--mode", "w", "--seed", seed]),
        "get": time_command(["get", path, str(key_number)], lambda out: out == expected),
        "version": time_command(["--version"], lambda out: out.startswith(b"semidbm ")),
    }
    reads = common + ["--reads", str(args.reads)]
    first_seed = round_number * (READERS + 1)
    result["one"] = run_phase("one reader", ["read"] + reads + ["--seed", str(first_seed)])
    directory_bytes = sum(os.stat(name).st_size for name in _pagecache.database_files(path))
    why_not = readers_fit(result["one"], directory_bytes)
    if why_not:
        notes.append("round %d: %s" % (round_number + 1, why_not))
        result["readers"] = None
    else:
        result["readers"] = run_readers(reads, range(first_seed + 1, first_seed + 1 + READERS))
    result["write"] = run_phase("writer set", ["write"] + common + ["--seed", seed])
    return result


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
    parser.add_argument(
        "--reads", type=int, default=1_000_000, help="random reads of each reader (1,000,000)"
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="rounds of the fresh-process measurements (5)"
    )
    parser.add_argument("--compact", action="store_true", help="also time a compaction")
    parser.add_argument(
        "--cold", action="store_true", help="also time opens with the files out of the page cache"
    )
    parser.add_argument("--dir", help="where the databases go (a new directory is made inside)")
    parser.add_argument("--keep", action="store_true", help="keep the semidbm db afterwards")
    parser.add_argument("--out", help="also write the Markdown report to this file")
    args = parser.parse_args()
    if args.records < 1 << 17 or args.reads < 1 or args.gdbm_seconds < 0 or args.repeats < 1:
        parser.error(
            "--records must be at least 2**17, --reads and --repeats at least 1, "
            "--gdbm-seconds >= 0"
        )
    if args.cold and not _pagecache.COLD:
        parser.error("--cold needs posix_fadvise, which this system lacks")

    directory = tempfile.mkdtemp(prefix="semidbm-scale-", dir=args.dir)
    notes = []
    results = {"cold": [], "compacted": None, "gdbm": None}
    try:
        path = os.path.join(directory, "semidbm.db")
        common = ["--records", str(args.records), "--path", path]
        before = os.getloadavg()[0]
        results["semidbm"] = run_phase("semidbm load", ["load", "semidbm"] + common)
        note_load("semidbm load", notes, before)
        if args.cold:
            before = os.getloadavg()[0]
            for round_number in range(args.repeats):
                for mode in ("r", "w"):
                    results["cold"].append(
                        run_phase(
                            "open from the disk",
                            ["open"]
                            + common
                            + ["--mode", mode, "--seed", str(round_number), "--cold"],
                        )
                    )
            note_load("opens from the disk (%d rounds)" % args.repeats, notes, before)
        began = perf_counter()
        warmed = _pagecache.warm(path)
        results["warmup"] = {
            "bytes": warmed,
            "seconds": perf_counter() - began,
            "state": _pagecache.cache_state(path),
        }
        before = os.getloadavg()[0]
        results["rounds"] = []
        for round_number in range(args.repeats):
            print("round %d of %d" % (round_number + 1, args.repeats), file=sys.stderr, flush=True)
            results["rounds"].append(measure_round(args, path, round_number, notes))
        note_load(
            "opens, commands, reads and writes in fresh processes (%d rounds)" % args.repeats,
            notes,
            before,
        )
        if args.compact:
            before = os.getloadavg()[0]
            results["compacted"] = run_phase("semidbm compaction", ["compact"] + common)
            note_load("semidbm compaction", notes, before)
        if not args.keep:
            shutil.rmtree(path)
        if args.gdbm_seconds:
            gdbm_path = os.path.join(directory, "gdbm.db")
            before = os.getloadavg()[0]
            results["gdbm"] = run_phase(
                "dbm.gnu load",
                [
                    "load", "dbm.gnu",
                    "--records", str(args.records),
                    "--path", gdbm_path,
                    "--seconds", str(args.gdbm_seconds),
                ],
            )
            note_load("dbm.gnu load", notes, before)
            os.remove(gdbm_path)
    finally:
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    if args.keep:
        notes.append("the semidbm db was kept in %s" % path)
    text = report(args, directory, results, notes)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)


if __name__ == "__main__":
    main()
