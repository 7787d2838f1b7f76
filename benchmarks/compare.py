"""Runs semidbm and its rivals side by side: the classic dbm benchmark and shelves.

Usage (the nox session ``bench`` sets up the environments and runs this
with the arguments after ``--``; without any, ``--preset a --out-dir
docs/bench``)::

    bash scripts/nox.sh -s bench -- [--preset a|b|c|d|all] [--repeat R]
        [--quick] [--keys N] [--value-size B] [--key-size K] [--with-dumb]
        [--out-dir DIR]

The presets:

- ``a`` (the default): the classic dbm workloads of the project's
  benchmarking guide (the shared ``BENCHMARK.md``) on 1,000,000 keys of
  16 bytes with values of 100 bytes: fills, cold, sequential, random and
  hot reads, deletes, plus the time to reopen the db and the memory its
  index keeps;
- ``b``: the same workloads on 1,000 keys with values of 100,000 bytes,
  plus how close the reads come to the rate at which this machine copies
  100,000 bytes into a new bytes object (which each of them must do);
- ``c``: shelves of small objects: 50 and 2,000 dicts written, read and
  iterated through ``shelve`` (``benchmarks/_shelf_worker.py``);
- ``d``: a large-object cache: 5,000 values of 1 MB through ``shelve``,
  synced every 250 writes, then read cold and warm;
- ``all``: the four, one after the other.

``--keys``, ``--value-size`` and ``--key-size`` change preset a or b;
``--quick`` shrinks every preset to a few seconds and one repetition (a
smoke test: its figures mean little).

The contenders:

- ``semidbm``: our package on its compiled (Cython) kernel; the worker
  stops with an error if ``semidbm.implementation`` is anything else;
- ``semidbm-python``: our package with ``SEMIDBM_PURE_PYTHON=1``;
- ``semidbm-0.5.1``: the original from PyPI, run by ``.venv-v051/bin/python``
  (or by ``$SEMIDBM_V051_PYTHON`` if set), since it has our import name;
- ``dbm.gnu`` and ``dbm.dumb`` from the standard library (in presets a
  and b, dumb only up to 100,000 keys unless ``--with-dumb``: it is slow);
- ``lmdb`` (presets a and b): LMDB through its native binding (write
  transactions of ``put``/``delete``, read transactions of ``get``), at
  its default durability;
- ``sqlitedict`` (presets c and d): a shelf-like mapping over SQLite;
- ``dict``: the ceiling, since nothing that keeps its data in a file
  beats it (a ``shelve.Shelf`` over a dict in preset c; not in d, where
  it would only measure 5 GB of memory).

Each run of a contender is a fresh process (``benchmarks/_worker.py`` for
presets a and b, ``benchmarks/_shelf_worker.py`` for c and d) that times
every workload and checks the data it reads back. The contenders take
turns (A B C, A B C, ...) for ``--repeat`` repetitions, all on the same
data within a repetition: these machines are shared, and an absolute
figure can move by 2x from one run to the next, so what counts is the
median of the per-repetition ratios. The databases go in the system's
temporary directory (``$TMPDIR`` to choose another; its filesystem is
named in the report, since fsync costs differ).

The report of a preset is a Markdown document on stdout: the machine,
the parameters and this command line (its paths relative to the
repository's top directory, so that a committed report names no
directory of the machine that made it), the median operations per
second, the ratios of ``semidbm`` and ``semidbm-python`` to every other
contender, the preset's own measurements, and its targets (from the
issue that set them) with the measured ratio beside each. With
``--out-dir`` it is also written to ``DIR/preset-X.md``, with one chart
per workload beside it (``DIR/preset-X-WORKLOAD.png``, drawn by
``benchmarks/_charts.py``). Progress goes to stderr.
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

#: The contenders the ratio tables compare against all the others.
BASELINES = ["semidbm", "semidbm-python"]

#: dbm.dumb runs in presets a and b only up to this many keys by default.
DUMB_KEY_LIMIT = 100_000

#: Keys in presets a and b under ``--quick``.
QUICK_KEYS = {"a": 20_000, "b": 100}

CLASSIC_CONTENDERS = [
    "semidbm",
    "semidbm-python",
    "semidbm-0.5.1",
    "dbm.gnu",
    "dbm.dumb",
    "lmdb",
    "dict",
]
SHELF_CONTENDERS = [
    "semidbm",
    "semidbm-python",
    "semidbm-0.5.1",
    "dbm.gnu",
    "dbm.dumb",
    "sqlitedict",
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
    ("ahead of") need more than ``factor``.
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


SHELF_SMALL = [
    "%s_%d" % (work, count) for count in (50, 2000) for work in ("write", "read", "iterate")
]
SHELF_LARGE = ["write", "read_cold", "read_warm"]

PRESETS = {
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


def run_worker(preset, name, settings, seed):
    """Run one contender of ``preset`` in a fresh process; return the worker's JSON result.

    A missing interpreter or module gives ``{"missing": reason}``; any
    other failure (a wrong read-back among them) ends this program.
    """
    python = interpreter(name)
    if not os.access(python, os.X_OK):
        return {"contender": name, "missing": "no interpreter at %s" % python}
    with tempfile.TemporaryDirectory(prefix="semidbm-bench-") as directory:
        command = [python, preset.worker, name, "--dir", directory, "--seed", str(seed)]
        if preset.classic:
            command += [
                "--keys",
                str(settings.keys),
                "--value-size",
                str(settings.value_size),
                "--key-size",
                str(settings.key_size),
            ]
        else:
            command += ["--preset", preset.name] + (["--quick"] if settings.quick else [])
        done = subprocess.run(command, env=worker_environment(name), capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("%s failed (exit status %d):\n%s" % (name, done.returncode, done.stderr.strip()))
    return json.loads(done.stdout)


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

    def ratio(self, mine, theirs, workload):
        """The median per-repetition ratio of ``mine`` to ``theirs``; None if either lacks it.

        For ``reopen`` it is their seconds over mine (above 1: mine is
        faster), as for every other workload.
        """
        if mine not in self.runs or theirs not in self.runs:
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
    if preset.classic:
        parameters = "%s keys of %d bytes, values of %s bytes" % (
            format_ops(settings.keys),
            settings.key_size,
            format_ops(settings.value_size),
        )
        figures = (
            "Figures are operations per second over a whole pass (higher is better). "
            "Opening a db is not timed but in read_cold (see below); closing a written "
            "one (for lmdb: committing the transaction and closing the environment) is."
        )
    elif preset.name == "c":
        parameters = "50 and 2,000 items (str keys, dicts of five fields) through shelve"
        figures = (
            "Figures are items per second over a whole pass that opens the shelf, does its "
            "work and closes it (higher is better); each pass is repeated for at least "
            "0.3 s and the median pass counts."
        )
    else:
        parameters = "5,000 values of 1,000,000 bytes through shelve, sync() every 250 writes"
        figures = (
            "Figures are values per second over a whole pass that opens the shelf, does "
            "its work and closes it (higher is better)."
        )
    if settings.quick:
        parameters += " (shrunk by --quick: a smoke test, not a measurement)"
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
        "(seed = repetition number)" % (parameters, settings.repeat),
        "- " + figures + " Every run checked what it read back.",
        "",
    ]


def contenders_section(results):
    """The table of contenders: what each one is, or why it did not run."""
    rows = []
    for name in results.preset.contenders:
        if name in results.runs:
            first = results.runs[name][0]
            rows.append([name, first["implementation"], first["python"], first["durability"]])
        else:
            rows.append([name, results.absent[name], "", ""])
    return [
        "## Contenders",
        "",
        markdown_table(["contender", "implementation", "Python", "durability"], rows, False),
        "",
    ]


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
        "## Operations per second (median of %d)" % repeat,
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
            "Median over the repetitions of (%s ops/s) / (contender ops/s): above 1 means "
            "%s is faster." % (baseline, baseline),
            "",
            markdown_table(["workload"] + ["vs %s" % name for name in others], rows),
            "",
        ]
    return lines


def reopen_sections(results, repeat):
    """Presets a and b: the reopen times and the index memory per key."""
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
        "## Reopen, seconds (median of %d; lower is better)" % repeat,
        "",
        "The time to open the db that fill_sequential wrote, take its length and look up "
        "one key, in a fresh process, with the file still in the page cache: `open()`, "
        "`len()` (`len(db.keys())` for semidbm 0.5.1, which has no `len()`) and `db[key]`; "
        'for lmdb, `lmdb.open()`, then one read transaction\'s `stat()["entries"]` and '
        '`get(key)`. A dict has no file to reopen. A row "ratio to X" gives, for each '
        "contender, the median over the repetitions of (contender's seconds) / (X's "
        "seconds): above 1 means X reopens faster.",
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


def draw_charts(results, out_dir):
    """Write one PNG per workload (and reopen) to ``out_dir``; return the Markdown showing them."""
    import _charts

    preset = results.preset
    lines = ["## Charts", ""]
    charts = [
        (w, "%s: operations per second (log scale; higher is better)" % w) for w in preset.workloads
    ]
    if preset.classic:
        charts.append(("reopen", "reopen: seconds (log scale; lower is better)"))
    for workload, axis_label in charts:
        bars = []
        for name in preset.contenders:
            if name not in results.runs:
                continue
            value = results.reopen(name) if workload == "reopen" else results.ops(name, workload)
            if value is not None:
                bars.append((name, value))
        if not bars:
            continue
        label = format_seconds if workload == "reopen" else format_ops
        filename = "preset-%s-%s.png" % (preset.name, workload)
        _charts.bar_chart(
            os.path.join(out_dir, filename),
            "Preset %s, %s" % (preset.name, workload),
            bars,
            axis_label,
            lambda value: label(value) + (" s" if workload == "reopen" else ""),
        )
        lines += ["![%s](%s)" % (workload, filename), ""]
    return lines


def report(results, settings, source_at_start, out_dir):
    """Return the Markdown report of one preset; with ``out_dir``, draw its charts there."""
    lines = header(results.preset, settings, source_at_start)
    lines += contenders_section(results)
    lines += speed_sections(results, settings.repeat)
    if results.preset.classic:
        lines += reopen_sections(results, settings.repeat)
        lines += copy_rate_section(results, settings, settings.repeat)
    lines += targets_section(results)
    lines += notes_section(results)
    if out_dir:
        lines += draw_charts(results, out_dir)
    return "\n".join(lines)


def run_preset(preset, settings):
    """Run every contender of ``preset``, interleaved, ``settings.repeat`` times; return Results."""
    absent = {}
    if preset.classic and settings.keys > DUMB_KEY_LIMIT and not settings.with_dumb:
        absent["dbm.dumb"] = "not run: slow above %s keys (--with-dumb runs it)" % format_ops(
            DUMB_KEY_LIMIT
        )
    runs = {}
    for repetition in range(settings.repeat):
        for name in preset.contenders:
            if name in absent:
                continue
            result = run_worker(preset, name, settings, seed=repetition)
            if "missing" in result:
                absent[name] = "missing: " + result["missing"]
                print("preset %s, %s: %s" % (preset.name, name, absent[name]), file=sys.stderr)
                continue
            runs.setdefault(name, []).append(result)
            summary = ", ".join(
                "%s %s" % (w, "n/a" if v is None else format_ops(v))
                for w, v in result["ops_per_sec"].items()
            )
            if result.get("reopen_seconds") is not None:
                summary += ", reopen %s s" % format_seconds(result["reopen_seconds"])
            print(
                "preset %s, repetition %d/%d, %s: %s"
                % (preset.name, repetition + 1, settings.repeat, name, summary),
                file=sys.stderr,
            )
    return Results(preset, runs, absent)


def main():
    parser = argparse.ArgumentParser(
        description="Run semidbm and its rivals side by side (see the module's docstring)."
    )
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS) + ["all"],
        default="a",
        help="which benchmark (a: 1,000,000 small records; default)",
    )
    parser.add_argument("--repeat", type=int, help="repetitions (5; 1 with --quick)")
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and one repetition: a smoke test"
    )
    parser.add_argument("--keys", type=int, help="presets a and b: number of keys")
    parser.add_argument("--value-size", type=int, help="presets a and b: bytes per value")
    parser.add_argument(
        "--key-size", type=int, default=16, help="presets a and b: bytes per key (16)"
    )
    parser.add_argument(
        "--with-dumb",
        action="store_true",
        help="run dbm.dumb even above %s keys" % format_ops(DUMB_KEY_LIMIT),
    )
    parser.add_argument("--out-dir", help="write preset-X.md and its charts (PNG) here")
    settings = parser.parse_args()
    names = sorted(PRESETS) if settings.preset == "all" else [settings.preset]
    sized = settings.keys is not None or settings.value_size is not None
    if sized and any(not PRESETS[name].classic for name in names):
        parser.error("--keys and --value-size apply to presets a and b only")
    if settings.repeat is None:
        settings.repeat = 1 if settings.quick else 5
    if settings.repeat < 1:
        parser.error("--repeat must be at least 1")
    if settings.out_dir:
        os.makedirs(settings.out_dir, exist_ok=True)

    source_at_start = source_version()
    for name in names:
        preset = PRESETS[name]
        chosen = argparse.Namespace(**vars(settings))
        if preset.classic:
            chosen.keys = settings.keys or (QUICK_KEYS[name] if settings.quick else preset.keys)
            if settings.value_size is None:
                chosen.value_size = preset.value_size
            if chosen.keys < 1 or chosen.value_size < 0:
                parser.error("--keys must be at least 1, --value-size at least 0")
        text = report(run_preset(preset, chosen), chosen, source_at_start, settings.out_dir)
        print(text)
        if settings.out_dir:
            with open(os.path.join(settings.out_dir, "preset-%s.md" % name), "w") as out:
                out.write(text + "\n")


if __name__ == "__main__":
    main()
