"""Runs semidbm and its rivals side by side: the classic dbm benchmark and shelves.

Usage (the nox session ``bench`` sets up the environments and runs this
with the arguments after ``--``)::

    bash scripts/nox.sh -s bench -- [--preset small|a|b|c|d|all] [--repeat R]
        [--quick] [--keys N] [--value-size B] [--key-size K] [--all-keys]
        [--out-dir DIR]

The presets:

- ``small`` (the default, about a minute on two CPUs): the classic dbm
  workloads of preset a on 100,000 keys, three repetitions, the slow
  contenders on fewer keys; a first look, not the published figures;
- ``a``: the classic dbm workloads of the project's benchmarking guide
  (the shared ``BENCHMARK.md``) on 1,000,000 keys of 16 bytes with
  values of 100 bytes: fills, cold, sequential, random and hot reads,
  deletes, plus the time to reopen the db and the memory its index keeps;
- ``b``: the same workloads on 1,000 keys with values of 100,000 bytes,
  plus how close the reads come to the rate at which this machine copies
  100,000 bytes into a new bytes object (which each of them must do);
- ``c``: shelves of small objects: 50 and 2,000 dicts written, read and
  iterated through ``shelve`` (``benchmarks/_shelf_worker.py``);
- ``d``: a large-object cache: 5,000 values of 1 MB through ``shelve``,
  synced every 250 writes, then read cold and warm;
- ``all``: the five, one after the other.

``--keys``, ``--value-size`` and ``--key-size`` change the classic
presets (small, a, b); ``--quick`` shrinks every preset to a few seconds
and one repetition (a smoke test: its figures mean little).

The contenders:

- ``semidbm``: our package on its compiled (Cython) kernel; the worker
  stops with an error if ``semidbm.implementation`` is anything else;
- ``semidbm-python``: our package with ``SEMIDBM_PURE_PYTHON=1``;
- ``semidbm-0.5.1``: the original from PyPI, run by ``.venv-v051/bin/python``
  (or by ``$SEMIDBM_V051_PYTHON`` if set), since it has our import name;
- ``dbm.gnu`` and ``dbm.dumb`` from the standard library;
- ``lmdb`` (classic presets): LMDB through its native binding (write
  transactions of ``put``/``delete``, read transactions of ``get``);
- ``diskcache``: its persistent dict, ``diskcache.Index`` (a
  ``diskcache.Cache`` at its defaults evicts past 1 GB: a cache, not a
  store);
- ``rocksdict``: RocksDB through ``rocksdict.Rdict``;
- ``dbm.sqlite3``: the standard library's dbm over SQLite, new in
  Python 3.13, run by the Python that ``$SEMIDBM_SQLITE3_PYTHON`` names
  (the bench session makes a virtual environment of pyenv's 3.13,
  ``.venv-sqlite3``); without one, the report says it was not run and why;
- ``sqlitedict`` (presets c and d): a shelf-like mapping over SQLite;
- ``dict``: the reference in memory, not a rival: it keeps nothing in a
  file (a ``shelve.Shelf`` over a dict in preset c; not in d, where it
  would only measure 5 GB of memory).

Each is called as its users call it, at its documented defaults,
durability included; the report's table of contenders says, for each,
what a crash or a power loss can take. The slow ones run on fewer keys
in the classic presets (``Preset.key_limits``; ``--all-keys`` lifts the
limits): their ratios then set semidbm's rate on the whole data set
against theirs on a smaller one, and their reopen has no ratio.

Each run of a contender is a fresh process (``benchmarks/_worker.py`` for
the classic presets, ``benchmarks/_shelf_worker.py`` for c and d) that
times every workload and checks the data it reads back. The contenders
take turns (A B C, A B C, ...) for ``--repeat`` repetitions, all on the
same data within a repetition: these machines are shared, and an
absolute figure can move by 2x from one run to the next, so what counts
is the median of the per-repetition ratios. The databases go in the
system's temporary directory (``$TMPDIR`` to choose another; its
filesystem is named in the report, since fsync costs differ).

Output: progress on stderr; on stdout, for each preset, a short aligned
summary (how many times faster or slower semidbm is than each
contender, per workload) and the path of the full report. The report of
a preset, ``preset-X.md``, goes with one chart per workload
(``preset-X-WORKLOAD.png``, drawn by ``benchmarks/_charts.py``) into a
new directory ``results/bench/DATE-TIME/`` of the repository (ignored by
git), or into ``--out-dir DIR`` (``--out-dir docs/bench`` to publish).
The report gives the machine, the parameters and this command line (its
paths relative to the repository's top directory, so that a committed
report names no directory of the machine that made it), the contenders
and their durability, the median operations per second, the ratios of
``semidbm`` and ``semidbm-python`` to every other contender, the
preset's own measurements, and its targets (from the issue that set
them) with the measured ratio beside each.
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
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

#: The contenders the ratio tables compare against all the others.
BASELINES = ["semidbm", "semidbm-python"]

#: The contender the terminal summary and the charts set against the others.
OURS = "semidbm"

#: Where the reports go unless ``--out-dir`` says otherwise (ignored by git).
RESULTS = os.path.join(REPO, "results", "bench")

#: The presets that ``--preset all`` runs, in order.
ALL_PRESETS = ["small", "a", "b", "c", "d"]

#: Under ``--quick``, the classic workers time each read workload for this long.
QUICK_READ_SECONDS = 0.02

#: The widest line of the terminal summary, in characters.
SUMMARY_WIDTH = 100

CLASSIC_CONTENDERS = [
    "semidbm",
    "semidbm-python",
    "semidbm-0.5.1",
    "dbm.gnu",
    "dbm.dumb",
    "lmdb",
    "diskcache",
    "rocksdict",
    "dbm.sqlite3",
    "dict",
]
SHELF_CONTENDERS = [
    "semidbm",
    "semidbm-python",
    "semidbm-0.5.1",
    "dbm.gnu",
    "dbm.dumb",
    "sqlitedict",
    "diskcache",
    "rocksdict",
    "dbm.sqlite3",
    "dict",
]

#: In the order the classic worker runs them.
CLASSIC_WORKLOADS = [
    "fill_sequential",
    "read_cold",
    "read_sequential",
    "read_random",
    "read_hot",
    "delete_sequential",
    "fill_random",
]


def each_read(rows, other, factor):
    """Targets: ``factor`` times ``other`` on each of the read workloads in ``rows``."""
    return [(row, other, factor) for row in rows if row.startswith("read")]


class Preset:
    """One benchmark setting: its worker, contenders, workloads and targets.

    ``targets`` lists ``(workload, other contender, factor)``: semidbm's
    median ratio to that contender must be at least ``factor`` (for
    ``reopen``, the contender's time over ours). ``strict`` targets
    ("ahead of") need more than ``factor``. A classic preset also has
    its number of ``keys`` (``quick_keys`` under ``--quick``), its
    ``value_size``, the ``key_limits`` of its slow contenders (at most
    that many keys each) and the ``min_read_seconds`` its workers time
    each read workload for (None: the worker's own default). ``repeat``
    is its number of repetitions unless ``--repeat`` says otherwise.
    """

    def __init__(
        self,
        name,
        title,
        worker,
        contenders,
        workloads,
        targets,
        strict=False,
        keys=None,
        value_size=None,
        quick_keys=None,
        key_limits=None,
        repeat=5,
        min_read_seconds=None,
    ):
        self.name = name
        self.title = title
        self.worker = os.path.join(HERE, worker)
        self.classic = worker == "_worker.py"
        self.contenders = contenders
        self.workloads = workloads
        self.targets = targets
        self.strict = strict
        self.keys = keys
        self.value_size = value_size
        self.quick_keys = quick_keys
        self.key_limits = key_limits or {}
        self.repeat = repeat
        self.min_read_seconds = min_read_seconds


SHELF_SMALL = [
    "%s_%d" % (work, count) for count in (50, 2000) for work in ("write", "read", "iterate")
]
SHELF_LARGE = ["write", "read_cold", "read_warm"]

PRESETS = {
    "small": Preset(
        "small",
        "the classic dbm workloads, a first look",
        "_worker.py",
        CLASSIC_CONTENDERS,
        CLASSIC_WORKLOADS,
        [],
        keys=100_000,
        value_size=100,
        quick_keys=5_000,
        key_limits={"dbm.dumb": 20_000, "diskcache": 10_000, "dbm.sqlite3": 2_000},
        repeat=3,
        min_read_seconds=0.1,
    ),
    "a": Preset(
        "a",
        "the classic dbm workloads, many small records",
        "_worker.py",
        CLASSIC_CONTENDERS,
        CLASSIC_WORKLOADS,
        [
            (fill, other, factor)
            for fill in ("fill_sequential", "fill_random")
            for other, factor in (("dbm.gnu", 15), ("lmdb", 1.2), ("dict", 0.6))
        ]
        + [
            ("read_hot", "dbm.gnu", 2),
            ("read_hot", "lmdb", 2),
            ("read_sequential", "dbm.gnu", 3),
            ("read_sequential", "lmdb", 1.2),
            ("read_sequential", "dict", 0.9),
            ("read_random", "dbm.gnu", 1.8),
            ("read_random", "lmdb", 1.8),
            ("read_random", "dict", 0.7),
            ("delete_sequential", "dbm.gnu", 15),
            ("delete_sequential", "lmdb", 1.5),
            ("reopen", "semidbm-0.5.1", 15),
        ],
        keys=1_000_000,
        value_size=100,
        quick_keys=20_000,
        key_limits={"dbm.dumb": 100_000, "diskcache": 100_000, "dbm.sqlite3": 20_000},
    ),
    "b": Preset(
        "b",
        "the classic dbm workloads, large values",
        "_worker.py",
        CLASSIC_CONTENDERS,
        CLASSIC_WORKLOADS,
        [
            (fill, other, factor)
            for fill in ("fill_sequential", "fill_random")
            for other, factor in (("dbm.gnu", 2), ("lmdb", 1.1))
        ]
        + each_read(CLASSIC_WORKLOADS, "dbm.gnu", 1.5)
        + each_read(CLASSIC_WORKLOADS, "lmdb", 1),
        keys=1_000,
        value_size=100_000,
        quick_keys=100,
    ),
    "c": Preset(
        "c",
        "shelves of small objects",
        "_shelf_worker.py",
        SHELF_CONTENDERS,
        SHELF_SMALL,
        [(row, other, 1) for row in SHELF_SMALL for other in ("dbm.gnu", "sqlitedict")],
        strict=True,
    ),
    "d": Preset(
        "d",
        "a large-object cache through shelve",
        "_shelf_worker.py",
        [name for name in SHELF_CONTENDERS if name != "dict"],
        SHELF_LARGE,
        [(row, other, 1) for row in SHELF_LARGE for other in ("dbm.gnu", "sqlitedict")],
        strict=True,
    ),
}


def contender_keys(preset, settings, name):
    """The number of keys contender ``name`` runs on: all, or its limit if it is a slow one.

    Under ``--quick`` the limit shrinks as the preset's keys do.
    """
    limit = preset.key_limits.get(name)
    if limit is None or settings.all_keys:
        return settings.keys
    if settings.quick:
        limit = max(1, limit * preset.quick_keys // preset.keys)
    return min(settings.keys, limit)


def interpreter(name):
    """Return ``(python, None)``, the Python that runs contender ``name``, or ``(None, why not)``.

    semidbm 0.5.1 has its own virtual environment; dbm.sqlite3 needs
    Python 3.13 or later: ``$SEMIDBM_SQLITE3_PYTHON``, else this Python
    if it is recent enough.
    """
    if name == "semidbm-0.5.1":
        default = os.path.join(REPO, ".venv-v051", "bin", "python")
        python = os.environ.get("SEMIDBM_V051_PYTHON", default)
        variable = "SEMIDBM_V051_PYTHON"
    elif name == "dbm.sqlite3":
        python = os.environ.get("SEMIDBM_SQLITE3_PYTHON")
        variable = "SEMIDBM_SQLITE3_PYTHON"
        if python is None:
            if sys.version_info >= (3, 13):
                return sys.executable, None
            return None, (
                "not run: it needs Python 3.13 or later, and SEMIDBM_SQLITE3_PYTHON is not set "
                "(the bench session sets it when pyenv has a 3.13)"
            )
    else:
        return sys.executable, None
    if not os.access(python, os.X_OK):
        return None, "missing: no interpreter at %s (%s)" % (from_top(python), variable)
    return python, None


def worker_environment(name):
    """Return the environment for contender ``name``: only semidbm-python forces the pure kernel."""
    env = dict(os.environ)
    env.pop("SEMIDBM_PURE_PYTHON", None)
    if name == "semidbm-python":
        env["SEMIDBM_PURE_PYTHON"] = "1"
    return env


def worker_command(preset, name, settings, python, directory, seed):
    """Return the command that runs contender ``name`` of ``preset``, its dbs in ``directory``."""
    command = [python, preset.worker, name, "--dir", directory, "--seed", str(seed)]
    if preset.classic:
        command += [
            "--keys",
            str(contender_keys(preset, settings, name)),
            "--value-size",
            str(settings.value_size),
            "--key-size",
            str(settings.key_size),
        ]
        seconds = QUICK_READ_SECONDS if settings.quick else preset.min_read_seconds
        if seconds is not None:
            command += ["--min-read-seconds", str(seconds)]
    else:
        command += ["--preset", preset.name] + (["--quick"] if settings.quick else [])
    return command


def run_worker(preset, name, settings, seed):
    """Run one contender of ``preset`` in a fresh process; return the worker's JSON result.

    A missing interpreter or module gives ``{"missing": reason}``; any
    other failure (a wrong read-back among them) ends this program.
    """
    python, reason = interpreter(name)
    if python is None:
        return {"contender": name, "missing": reason}
    with tempfile.TemporaryDirectory(prefix="semidbm-bench-") as directory:
        command = worker_command(preset, name, settings, python, directory, seed)
        done = subprocess.run(command, env=worker_environment(name), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("%s failed (exit status %d):\n%s" % (name, done.returncode, done.stderr.strip()))
    result = json.loads(done.stdout)
    if "missing" in result:
        result["missing"] = "missing: " + result["missing"]
    return result


def source_version():
    """Return the repository's commit, and whether src/ has uncommitted changes.

    compare.py notes it at the start and at the end of a run: the
    workers import the source tree as it is when each one starts, so a
    change in between (a commit, a rebuilt kernel) would mix versions.
    """

    def git(*arguments):
        try:
            done = subprocess.run(["git", "-C", REPO, *arguments], capture_output=True, text=True)
        except FileNotFoundError:  # git is not installed
            return None
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


class Results:
    """What the runs of one preset gave, with the medians and ratios the report quotes.

    ``runs`` maps each contender that ran to its worker results, one per
    repetition; ``absent`` maps each other contender to why it did not run.
    """

    def __init__(self, preset, runs, absent):
        self.preset = preset
        self.runs = runs
        self.absent = absent

    def missing_cell(self, name):
        """The table cell of a contender that did not run."""
        return "missing" if self.absent[name].startswith("missing") else "not run"

    def ops(self, name, workload):
        """The median ops/s of ``name`` on ``workload``; None where it does not apply."""
        values = [run["ops_per_sec"][workload] for run in self.runs[name]]
        return None if None in values else statistics.median(values)

    def reopen(self, name):
        """The median reopen seconds of ``name``; None for the dict."""
        values = [run["reopen_seconds"] for run in self.runs[name]]
        return None if None in values else statistics.median(values)

    def keys(self, name):
        """The number of keys contender ``name`` ran on (None for the shelf presets)."""
        return self.runs[name][0].get("keys")

    def fewer_keys(self):
        """The contenders that ran on fewer keys than the most any ran on, with their keys."""
        counts = {name: self.keys(name) for name in self.runs}
        most = max((count for count in counts.values() if count is not None), default=None)
        return {name: count for name, count in counts.items() if count is not None and count < most}

    def ratio(self, mine, theirs, workload):
        """The median per-repetition ratio of ``mine`` to ``theirs``; None if either lacks it.

        For ``reopen`` it is their seconds over mine (above 1: mine is
        faster), as for every other workload, and None unless both ran
        on the same number of keys: a reopen's time grows with the db.
        """
        if mine not in self.runs or theirs not in self.runs:
            return None
        if workload == "reopen" and self.keys(mine) != self.keys(theirs):
            return None
        ratios = []
        for my_run, their_run in zip(self.runs[mine], self.runs[theirs]):
            if workload == "reopen":
                a, b = their_run["reopen_seconds"], my_run["reopen_seconds"]
            else:
                a, b = my_run["ops_per_sec"][workload], their_run["ops_per_sec"][workload]
            if a is None or b is None:
                return None
            ratios.append(a / b)
        return statistics.median(ratios)


def from_top(word):
    """Return ``word`` as seen from the repository's top directory, if it is a path there.

    An absolute path inside the repository, or a relative one that
    exists from the current directory, becomes relative to the top
    directory; any other word, an absolute path elsewhere among them
    (``/usr/bin/python3``), stays as it is.
    """
    full = os.path.abspath(word)
    if os.path.isabs(word):
        inside = os.path.commonpath([full, REPO]) == REPO
        return os.path.relpath(full, REPO) if inside else word
    return os.path.relpath(full, REPO) if os.path.exists(word) else word


def command_line(argv):
    """Return the words of ``argv`` to run from the repository's top directory.

    The report quotes them: a path of the checkout written absolute, or
    relative to another directory, would name this machine's layout.
    An option's value given as ``--out-dir=DIR`` is rewritten too.
    """
    words = []
    for word in argv:
        if word.startswith("--") and "=" in word:
            option, value = word.split("=", 1)
            words.append(option + "=" + from_top(value))
        else:
            words.append(from_top(word))
    return words


def parameters(preset, settings):
    """Describe the data set of ``preset`` as ``settings`` size it, for the report and summary."""
    if preset.classic:
        text = "%s keys of %d bytes, values of %s bytes" % (
            format_ops(settings.keys),
            settings.key_size,
            format_ops(settings.value_size),
        )
    elif preset.name == "c":
        text = "50 and 2,000 items (str keys, dicts of five fields) through shelve"
    else:
        text = "5,000 values of 1,000,000 bytes through shelve, sync() every 250 writes"
    if settings.quick:
        text += " (shrunk by --quick: a smoke test, not a measurement)"
    return text


def figures(preset):
    """Say what the figures of ``preset`` are: what a pass times, and what counts."""
    if preset.classic:
        return (
            "Figures are operations per second over a whole pass (higher is better). "
            "Opening a db is not timed but in read_cold (see below); closing a written "
            "one (for lmdb: committing the transaction and closing the environment) is."
        )
    if preset.name == "c":
        return (
            "Figures are items per second over a whole pass that opens the shelf, does its "
            "work and closes it (higher is better); each pass is repeated for at least "
            "0.3 s and the median pass counts."
        )
    return (
        "Figures are values per second over a whole pass that opens the shelf, does "
        "its work and closes it (higher is better)."
    )


def header(preset, settings, source_at_start):
    """The report's title and the bullet list of how it was made."""
    source_at_end = source_version()
    if source_at_end == source_at_start:
        source = "- semidbm source: commit %s" % source_at_start
    else:
        source = (
            "- semidbm source: **changed during the run**, from commit %s to %s: "
            "the repetitions may have run different code" % (source_at_start, source_at_end)
        )
    temporary = tempfile.gettempdir()
    return [
        "# semidbm benchmark, preset %s: %s" % (preset.name, preset.title),
        "",
        "- Command: `%s` (run from the repository's top directory)"
        % shlex.join(command_line(sys.orig_argv)),
        "- Date: %s" % datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "- Machine: %s, %d CPUs, %s" % (cpu_model(), os.cpu_count(), platform.platform()),
        source,
        "- Databases in: %s (%s)" % (temporary, filesystem_type(temporary)),
        "- Parameters: %s; %d repetitions, contenders interleaved, each run a fresh "
        "process; the data set is the same for every contender in a repetition "
        "(seed = repetition number)" % (parameters(preset, settings), settings.repeat),
        "- " + figures(preset) + " Every run checked what it read back.",
        "",
    ]


def keys_cell(results, name):
    """The contenders table's cell for the number of keys ``name`` ran on (classic presets)."""
    slow = " (fewer: slow)" if name in results.fewer_keys() else ""
    return format_ops(results.keys(name)) + slow


def contenders_section(results):
    """The table of contenders: what each one is and how durable, or why it did not run."""
    classic = results.preset.classic
    header = ["contender", "implementation", "Python"]
    header += ["keys"] if classic else []
    header += ["durability at its defaults"]
    rows = []
    for name in results.preset.contenders:
        if name in results.runs:
            first = results.runs[name][0]
            row = [name, first["implementation"], first["python"]]
            row += [keys_cell(results, name)] if classic else []
            rows.append(row + [first["durability"]])
        else:
            rows.append([name, results.absent[name]] + [""] * (len(header) - 2))
    lines = ["## Contenders", "", markdown_table(header, rows, False), ""]
    if results.fewer_keys():
        lines += [
            "The slow contenders ran on fewer keys, so that the preset ends in its time "
            "(`--all-keys` runs them on every key): their ratios set semidbm's rate on the "
            "whole data set against theirs on a smaller db, which is no slower per "
            "operation, so they flatter them if anything.",
            "",
        ]
    return lines


def speed_sections(results, repeat):
    """The median ops/s table and, for each baseline that ran, its ratio table."""
    preset = results.preset

    def cell(name, workload):
        if name not in results.runs:
            return results.missing_cell(name)
        value = results.ops(name, workload)
        return "n/a" if value is None else format_ops(value)

    rows = [[w] + [cell(name, w) for name in preset.contenders] for w in preset.workloads]
    lines = [
        "## Operations per second",
        "",
        "Each cell: the median, over the %d repetitions, of that contender's own "
        "operations per second (higher is better). Two cells of a row need not divide to "
        "the ratio the next tables give: those are medians of the per-repetition ratios, "
        "each taken between runs made one after the other, which cancels the drift of a "
        "shared machine from one repetition to the next; a ratio of two medians can pair "
        "figures from different repetitions." % repeat,
        "",
        markdown_table(["workload"] + preset.contenders, rows),
        "",
    ]
    for baseline in BASELINES:
        if baseline not in results.runs:
            continue
        others = [name for name in preset.contenders if name != baseline]

        def ratio(name, workload):
            if name not in results.runs:
                return results.missing_cell(name)
            value = results.ratio(baseline, name, workload)
            return "n/a" if value is None else format_ratio(value)

        rows = [[w] + [ratio(name, w) for name in others] for w in preset.workloads]
        lines += [
            "## %s relative to each contender" % baseline,
            "",
            "Each cell: the median over the %d repetitions of (%s's ops/s) / (the "
            "contender's ops/s) in the same repetition: above 1 means %s is faster."
            % (repeat, baseline, baseline),
            "",
            markdown_table(["workload"] + ["vs %s" % name for name in others], rows),
            "",
        ]
    return lines


def reopen_sections(results, repeat):
    """Classic presets: the reopen times and the index memory per key."""
    contenders = results.preset.contenders

    def reopen_cell(name):
        if name not in results.runs:
            return results.missing_cell(name)
        value = results.reopen(name)
        return "n/a" if value is None else format_seconds(value)

    def reopen_ratio(baseline, name):
        if name == baseline:
            return ""
        if name not in results.runs:
            return results.missing_cell(name)
        value = results.ratio(baseline, name, "reopen")
        return "n/a" if value is None else format_ratio(value)

    rows = [["seconds"] + [reopen_cell(name) for name in contenders]]
    rows += [
        ["ratio to %s" % baseline] + [reopen_ratio(baseline, name) for name in contenders]
        for baseline in BASELINES
        if baseline in results.runs
    ]

    def memory_cell(name):
        if name not in results.runs:
            return results.missing_cell(name)
        values = [run["index_bytes_per_key"] for run in results.runs[name]]
        return "{:.1f}".format(statistics.median(values))

    return [
        "## Reopen, seconds (lower is better)",
        "",
        "The time to open the db that fill_sequential wrote, take its length and look up "
        "one key, in a fresh process, with the file still in the page cache: `open()`, "
        "`len()` (`len(db.keys())` for semidbm 0.5.1, which has no `len()`; none for "
        "rocksdict, which keeps no length) and `db[key]`; for lmdb, `lmdb.open()`, then "
        'one read transaction\'s `stat()["entries"]` and `get(key)`. A dict has no file '
        "to reopen.",
        "",
        "The row \"seconds\" gives the median over the %d repetitions of each "
        "contender's own time. A row \"ratio to X\" gives, for each contender, the median "
        "over the repetitions of (contender's seconds) / (X's seconds) in the same "
        "repetition: above 1 means X reopens faster. These times are milliseconds or "
        "less, where a moment of the machine's other work weighs heavily, so a ratio of "
        "the two medians in the first row can be far from the median ratio below it: "
        "the median ratio pairs runs made one after the other. A contender that ran on "
        "fewer keys has no ratio (n/a): its db is smaller." % repeat,
        "",
        markdown_table([""] + contenders, rows),
        "",
        "## Index memory, bytes per key (median of %d)" % repeat,
        "",
        "The growth of the process's anonymous resident memory (RssAnon in "
        "/proc/self/status, read after `gc.collect()`) from just before the reopen above "
        "to just after it, divided by the number of keys; the data set was already in "
        "memory before the first reading. For the dict: the dict built from the data set "
        "(its table only, since the keys and values are the data set's). Pages mapped "
        "from a file (lmdb's whole tree, gdbm's and semidbm's mapped reads) are page "
        "cache, not anonymous memory, and are not counted.",
        "",
        markdown_table(
            [""] + contenders, [["bytes per key"] + [memory_cell(n) for n in contenders]]
        ),
        "",
        "read_cold evicts the db's files from the page cache (`posix_fadvise` "
        "`POSIX_FADV_DONTNEED`, after an fsync) and then times the open and a read of "
        "every key in the order written: semidbm's open reads its index file (or, "
        "without one, the whole log), so leaving the open out would favour it.",
        "",
    ]


def copy_rate_section(results, settings, repeat):
    """Large values: how close each contender's reads come to a plain copy of the values."""
    rates = [run["copy_bytes_per_sec"] for runs in results.runs.values() for run in runs]
    if not rates or None in rates:
        return []
    rate = statistics.median(rates)
    reads = [w for w in results.preset.workloads if w.startswith("read")]
    contenders = [name for name in results.preset.contenders if name in results.runs]

    def cell(name, workload):
        value = results.ops(name, workload)
        if value is None:
            return "n/a"
        return "{:.0%}".format(value * settings.value_size / rate)

    rows = [[w] + [cell(name, w) for name in contenders] for w in reads]
    return [
        "## Reads as a fraction of the memory copy rate",
        "",
        "Every read of a value returns a new bytes object of %s bytes, so no read can be "
        "faster than copying that many bytes. Copying values of that size out of one "
        "large bytes object (each slice a new bytes object, over more memory than the "
        "caches hold) ran at %.2f GB/s here (median over all runs); the table gives each "
        "contender's read rate (ops/s times the value size) as a fraction of it."
        % (format_ops(settings.value_size), rate / 1e9),
        "",
        markdown_table(["workload"] + contenders, rows),
        "",
    ]


def targets_section(results):
    """The preset's targets for semidbm, each with its measured median ratio."""
    preset = results.preset
    if not preset.targets:
        return []
    rows = []
    for workload, other, factor in preset.targets:
        wanted = ("more than %sx" if preset.strict else "at least %sx") % significant(factor)
        value = results.ratio("semidbm", other, workload)
        if value is None:
            rows.append([workload, other, wanted, "not measured", ""])
            continue
        met = value > factor if preset.strict else value >= factor
        rows.append([workload, other, wanted, format_ratio(value), "yes" if met else "**no**"])
    return [
        "## Targets",
        "",
        "semidbm (compiled) against each contender named, as the median per-repetition "
        "ratio (for reopen: their seconds over ours).",
        "",
        markdown_table(["workload", "against", "target", "measured", "met"], rows, False),
        "",
    ]


def notes_section(results):
    """Each distinct note of each contender's runs, once."""
    notes = []
    for name in results.preset.contenders:
        for note in dict.fromkeys(n for run in results.runs.get(name, []) for n in run["notes"]):
            notes.append("- %s: %s." % (name, note))
    return ["## Notes", ""] + notes + [""] if notes else []


def chart_bars(results, workload):
    """The bars of ``workload``'s chart: ``(label, ratio)`` for each contender with a ratio.

    The ratio is semidbm's to the contender, the median of the
    per-repetition ratios; a label names the keys of a contender that
    ran on fewer.
    """
    fewer = results.fewer_keys()
    bars = []
    for name in results.preset.contenders:
        value = None if name == OURS else results.ratio(OURS, name, workload)
        if value is not None:
            label = name + (" (%s keys)" % format_ops(fewer[name]) if name in fewer else "")
            bars.append((label, value))
    return bars


def draw_charts(results, out_dir):
    """Write one ratio chart (PNG) per workload to ``out_dir``; return the Markdown showing them."""
    import _charts

    preset = results.preset
    workloads = preset.workloads + (["reopen"] if preset.classic else [])
    lines = [
        "## Charts",
        "",
        "One chart per workload: how many times faster (or slower) semidbm is than each "
        "contender, the median of the per-repetition ratios, on a linear scale.",
        "",
    ]
    for workload in workloads:
        bars = chart_bars(results, workload)
        if not bars:
            continue
        filename = "preset-%s-%s.png" % (preset.name, workload)
        what = "seconds to reopen" if workload == "reopen" else "operations per second"
        _charts.ratio_chart(
            os.path.join(out_dir, filename),
            "Preset %s, %s: semidbm against each contender" % (preset.name, workload),
            bars,
            "semidbm's speed / the contender's (x, from %s; linear)" % what,
            times,
        )
        lines += ["![%s](%s)" % (workload, filename), ""]
    return lines


def report(results, settings, source_at_start, out_dir):
    """Return the Markdown report of one preset, drawing its charts in ``out_dir``."""
    lines = header(results.preset, settings, source_at_start)
    lines += contenders_section(results)
    lines += speed_sections(results, settings.repeat)
    if results.preset.classic:
        lines += reopen_sections(results, settings.repeat)
        lines += copy_rate_section(results, settings, settings.repeat)
    lines += targets_section(results)
    lines += notes_section(results)
    lines += draw_charts(results, out_dir)
    return "\n".join(lines)


def times(ratio):
    """Say how many times faster or slower mine / theirs is: ``2.50x faster``."""
    if ratio >= 1:
        return "%sx faster" % significant(ratio)
    return "%sx slower" % significant(1 / ratio)


def aligned_blocks(header, rows, width):
    """Return text lines of a table aligned in columns, split into blocks of at most ``width``.

    The first column (the row names) starts every block; the other
    columns are right-aligned and go into as many blocks as the width
    needs, one blank line between blocks.
    """
    table = [header] + rows
    widths = [max(len(row[column]) for row in table) for column in range(len(header))]
    blocks, block = [], []
    used = widths[0]
    for column in range(1, len(header)):
        if block and used + 2 + widths[column] > width:
            blocks.append(block)
            block, used = [], widths[0]
        block.append(column)
        used += 2 + widths[column]
    blocks.append(block)
    lines = []
    for block in blocks:
        if lines:
            lines.append("")
        for row in table:
            cells = [row[0].ljust(widths[0])] + [row[c].rjust(widths[c]) for c in block]
            lines.append("  ".join(cells).rstrip())
    return lines


def summary(results, settings, report_path):
    """The terminal's summary of a preset: semidbm against each contender, and the report's path.

    Prose is wrapped and the table split into blocks to fit SUMMARY_WIDTH
    columns; only the report's path may run longer.
    """
    preset = results.preset
    others = [name for name in preset.contenders if name != OURS and name in results.runs]
    workloads = preset.workloads + (["reopen"] if preset.classic else [])
    prose = ["Preset %s (%s): %s." % (preset.name, preset.title, parameters(preset, settings))]
    table = []
    if OURS not in results.runs:
        prose.append("semidbm did not run: %s." % results.absent[OURS])
    elif others:
        ratios = (
            "the ratio of one repetition"
            if settings.repeat == 1
            else "the median of %d per-repetition ratios" % settings.repeat
        )
        if preset.classic:
            ratios += (
                " of operations per second (for reopen, of seconds). n/a: the workload does "
                "not apply, or the contender's db was smaller"
            )
        else:
            ratios += " of items per second. n/a: the workload does not apply"
        prose.append(
            "How many times faster or slower semidbm is than each contender: %s." % ratios
        )
        rows = []
        for workload in workloads:
            cells = [results.ratio(OURS, name, workload) for name in others]
            rows.append([workload] + ["n/a" if c is None else times(c) for c in cells])
        table = aligned_blocks(["workload"] + others, rows, SUMMARY_WIDTH)
    notes = []
    if "dict" in others:
        notes.append("dict: the reference in memory, not a rival; it keeps nothing in a file.")
    fewer = results.fewer_keys()
    if fewer:
        notes.append(
            "Slow contenders ran on fewer keys: %s."
            % ", ".join("%s %s" % (name, format_ops(count)) for name, count in fewer.items())
        )
    notes += ["%s %s." % (name, results.absent[name]) for name in results.absent if name != OURS]
    lines = [""]
    for paragraph in prose:
        lines += textwrap.wrap(paragraph, SUMMARY_WIDTH)
    lines += [""] + table + ([""] if table else [])
    for note in notes:
        lines += textwrap.wrap(note, SUMMARY_WIDTH, subsequent_indent="  ")
    lines += ["", "Full report: %s" % from_top(report_path)]
    return lines


def run_preset(preset, settings):
    """Run every contender of ``preset``, interleaved, ``settings.repeat`` times; return Results."""
    absent = {}
    runs = {}
    for repetition in range(settings.repeat):
        for name in preset.contenders:
            if name in absent:
                continue
            started = time.monotonic()
            result = run_worker(preset, name, settings, seed=repetition)
            if "missing" in result:
                absent[name] = result["missing"]
                print("preset %s, %s: %s" % (preset.name, name, absent[name]), file=sys.stderr)
                continue
            runs.setdefault(name, []).append(result)
            print(
                "preset %s, repetition %d/%d: %s done in %.1f s"
                % (preset.name, repetition + 1, settings.repeat, name, time.monotonic() - started),
                file=sys.stderr,
            )
    return Results(preset, runs, absent)


def new_directory(parent, name):
    """Make and return a new directory ``parent/name``, or ``name-2``, ``name-3``... if taken."""
    os.makedirs(parent, exist_ok=True)
    for attempt in range(1, 1000):
        path = os.path.join(parent, name if attempt == 1 else "%s-%d" % (name, attempt))
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        return path
    raise FileExistsError("no free name like %s in %s" % (name, parent))


def results_directory(out_dir):
    """Return the directory the reports go to, made if need be; exit if it cannot be made.

    ``out_dir`` if given; else a new directory under RESULTS named for
    the date and time, so that no run writes over another's, nor over a
    committed file. Made before the run, so that a place where nothing
    can be written fails at once, not after the benchmark.
    """
    try:
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            return out_dir
        return new_directory(RESULTS, datetime.datetime.now().strftime("%Y-%m-%d-%H%M%S"))
    except OSError as error:
        sys.exit("cannot make the directory for the reports: %s (--out-dir chooses one)" % error)


def remove_if_empty(directory):
    """Remove ``directory`` if nothing was written in it (a run that stopped early)."""
    try:
        os.rmdir(directory)
    except OSError:  # not empty, or gone
        pass


def preset_settings(preset, settings):
    """Return ``settings`` completed for ``preset``: its keys, value size and repetitions."""
    chosen = argparse.Namespace(**vars(settings))
    if chosen.repeat is None:
        chosen.repeat = 1 if settings.quick else preset.repeat
    if preset.classic:
        default = preset.quick_keys if settings.quick else preset.keys
        chosen.keys = settings.keys or default
        if settings.value_size is None:
            chosen.value_size = preset.value_size
    return chosen


def parse_arguments(argv=None):
    """Parse and check the command line (``argv``, or the program's own)."""
    parser = argparse.ArgumentParser(
        description="Run semidbm and its rivals side by side (see the module's docstring)."
    )
    parser.add_argument(
        "--preset",
        choices=ALL_PRESETS + ["all"],
        default="small",
        help="which benchmark (small: about a minute, the default; a, b, c, d: the full "
        "ones; all: the five)",
    )
    parser.add_argument(
        "--repeat", type=int, help="repetitions (small: 3, the others: 5; 1 with --quick)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and one repetition: a smoke test"
    )
    parser.add_argument("--keys", type=int, help="classic presets (small, a, b): number of keys")
    parser.add_argument("--value-size", type=int, help="classic presets: bytes per value")
    parser.add_argument(
        "--key-size", type=int, default=16, help="classic presets: bytes per key (16)"
    )
    parser.add_argument(
        "--all-keys",
        action="store_true",
        help="run the slow contenders (dbm.dumb, diskcache, dbm.sqlite3) on every key too",
    )
    parser.add_argument(
        "--out-dir",
        help="write preset-X.md and its charts here (default: a new directory under "
        "results/bench/)",
    )
    settings = parser.parse_args(argv)
    settings.presets = ALL_PRESETS if settings.preset == "all" else [settings.preset]
    sized = settings.keys is not None or settings.value_size is not None
    if sized and any(not PRESETS[name].classic for name in settings.presets):
        parser.error("--keys and --value-size apply to the classic presets (small, a, b) only")
    if settings.repeat is not None and settings.repeat < 1:
        parser.error("--repeat must be at least 1")
    if settings.keys is not None and settings.keys < 1:
        parser.error("--keys must be at least 1")
    if settings.value_size is not None and settings.value_size < 0:
        parser.error("--value-size must be at least 0")
    return settings


def write_report(results, settings, source_at_start, out_dir):
    """Write the report of ``results`` and its charts to ``out_dir``; return the report's path."""
    path = os.path.join(out_dir, "preset-%s.md" % results.preset.name)
    text = report(results, settings, source_at_start, out_dir)
    with open(path, "w") as out:
        out.write(text + "\n")
    return path


def main():
    settings = parse_arguments()
    out_dir = results_directory(settings.out_dir)
    source_at_start = source_version()
    written = []
    try:
        for name in settings.presets:
            preset = PRESETS[name]
            chosen = preset_settings(preset, settings)
            results = run_preset(preset, chosen)
            try:
                written.append(write_report(results, chosen, source_at_start, out_dir))
            except OSError as error:
                # The summary still shows what the run found.
                print("\n".join(summary(results, chosen, out_dir)[:-1]), flush=True)
                sys.exit("the report could not be written: %s" % error)
            print("\n".join(summary(results, chosen, written[-1])), flush=True)
    except KeyboardInterrupt:
        done = ", ".join(from_top(path) for path in written) or "none"
        sys.exit("interrupted; the reports of the presets that finished: %s" % done)
    finally:
        if not settings.out_dir:
            remove_if_empty(out_dir)


if __name__ == "__main__":
    main()
