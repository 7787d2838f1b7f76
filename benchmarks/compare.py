"""Runs semidbm and its rivals side by side: the classic dbm benchmark and shelves.

Usage (the nox session ``bench`` sets up the environments and runs this
with the arguments after ``--``)::

    bash scripts/nox.sh -s bench -- [--preset small|a|b|c|d|e|all] [--repeat R]
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
- ``e``: several processes on one database (``benchmarks/_processes_worker.py``):
  4 processes fill one store, each its own share of 200,000 keys, then
  run 90% reads and 10% writes on it, every operation its own lock or
  transaction; and, for semidbm alone, a shared writer against the
  exclusive one (single puts, ``update()`` of 1,000 items) and a
  read-only handle pickled to the 2 workers of a ``ProcessPoolExecutor``
  that read 1,000,000 keys, against one process;
- ``all``: the six, one after the other.

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
- ``lmdb`` (classic presets and e): LMDB through its native binding (write
  transactions of ``put``/``delete``, read transactions of ``get``; in
  preset e one transaction per operation, with ``sync=False``);
- ``diskcache``: its persistent dict, ``diskcache.Index`` (a
  ``diskcache.Cache`` at its defaults evicts past 1 GB: a cache, not a
  store);
- ``rocksdict``: RocksDB through ``rocksdict.Rdict``;
- ``dbm.sqlite3``: the standard library's dbm over SQLite, new in
  Python 3.13, run by the Python that ``$SEMIDBM_SQLITE3_PYTHON`` names
  (the bench session makes a virtual environment of pyenv's 3.13,
  ``.venv-sqlite3``); without one, the report says it was not run and why;
- ``sqlitedict`` (presets c and d): a shelf-like mapping over SQLite;
- ``persistdict-json`` and ``persistdict-sqlite`` (preset c): zerodep's
  persistdict, a mapping that stores values as JSON, over its JSON file
  backend and its SQLite backend (the contenders of the benchmark that
  preset c reproduces; preset d's bytes are no JSON). PyPI's zerodep is
  only the command that copies the module from zerodep's repository
  (``zerodep add persistdict -d DIR``): with DIR on ``PYTHONPATH`` they
  run, without it the report says they are missing and why;
- ``dict``: the reference in memory, not a rival: it keeps nothing in a
  file (a ``shelve.Shelf`` over a dict in preset c; not in d, where it
  would only measure 5 GB of memory).

In preset e, semidbm runs as shared writers (flag ``"cm"``); gdbm and
rocksdict refuse a second writer process, and dbm.dumb and semidbm
0.5.1 have no lock between processes: the report names each of them
with its reason instead of figures.

Each is called as its users call it, at its documented defaults,
durability included; the report's table of contenders says, for each,
what a crash or a power loss can take. The slow ones run on fewer keys
in the classic presets (``Preset.key_limits``, ``_presets.py``;
``--all-keys`` lifts the limits): their ratios then set semidbm's rate
on the whole data set against theirs on a smaller one, and their
reopen has no ratio.

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
contender, per workload, the median with the least and greatest of the
per-repetition ratios; a note on each contender that ran on fewer keys,
timed something otherwise or differs in durability) and the path of the
full report. The report of
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
import json
import os
import subprocess
import sys
import tempfile
import time

import _results
from _compare_report import Results, report, summary
from _presets import ALL_PRESETS, KEY_SIZE, PRESETS
from _provenance import REPO, from_top, source_version

#: Where the reports go unless ``--out-dir`` says otherwise (ignored by git).
RESULTS = os.path.join(REPO, "results", "bench")

#: Why a worker may give no figures: the keys of its answer that say so.
ABSENT = ("missing", "cannot")

#: Under ``--quick``, the classic workers time each read workload for this long.
QUICK_READ_SECONDS = 0.02


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

    A missing interpreter or module gives ``{"missing": reason}``, a
    contender that cannot do the preset's work (several writer
    processes) ``{"cannot": reason}``, each reason starting with that
    word; any other failure (a wrong read-back among them) ends this
    program.
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
    for word in ABSENT:
        if word in result:
            result[word] = "%s: %s" % (word, result[word])
    return result

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
            reason = next((result[word] for word in ABSENT if word in result), None)
            if reason:
                absent[name] = reason
                print("preset %s, %s: %s" % (preset.name, name, absent[name]), file=sys.stderr)
                continue
            runs.setdefault(name, []).append(result)
            print(
                "preset %s, repetition %d/%d: %s done in %.1f s"
                % (preset.name, repetition + 1, settings.repeat, name, time.monotonic() - started),
                file=sys.stderr,
            )
    return Results(preset, runs, absent)


def results_directory(out_dir):
    """Return the directory the reports go to (``_results.results_directory`` under RESULTS)."""
    return _results.results_directory(out_dir, RESULTS)


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
        help="which benchmark (small: about a minute, the default; a, b, c, d, e: the full "
        "ones; all: the six)",
    )
    parser.add_argument(
        "--repeat", type=int, help="repetitions (small and e: 3, the others: 5; 1 with --quick)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes and one repetition: a smoke test"
    )
    parser.add_argument("--keys", type=int, help="classic presets (small, a, b): number of keys")
    parser.add_argument("--value-size", type=int, help="classic presets: bytes per value")
    parser.add_argument(
        "--key-size",
        type=int,
        default=KEY_SIZE,
        help="classic presets: bytes per key (%d)" % KEY_SIZE,
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
