"""The comparison benchmark's arithmetic and file handling (benchmarks/compare.py, _pagecache.py).

The benchmark itself runs in CI as ``scripts/nox.sh -s bench -- --preset all
--quick``; these tests pin what its report and its terminal summary claim
(which ratios they quote, whether a target counts as met, which contender
ran on fewer keys or not at all), where its results go (a new directory
that git ignores, never a committed file), and that every apt-get of the
session's setup waits for another apt's lock rather than fail.
"""

import argparse
import ast
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

import semidbm

from .support import benchmark_scripts

pytestmark = pytest.mark.tooling

_BENCHMARKS = benchmark_scripts.BENCHMARKS


compare = benchmark_scripts.load("compare")
compare_report = benchmark_scripts.load("_compare_report")
presets = benchmark_scripts.load("_presets")
report = benchmark_scripts.load("_report")
pagecache = benchmark_scripts.load("_pagecache")
results_module = benchmark_scripts.load("_results")


def run(ops, reopen=None):
    """A worker result with ``ops`` per second for the workload "w" and reopen seconds."""
    return {"ops_per_sec": {"w": ops}, "reopen_seconds": reopen, "notes": []}


def results(runs, targets=(), strict=False):
    preset = presets.Preset("t", "test", "_worker.py", list(runs), ["w"], list(targets), strict)
    return compare.Results(preset, runs, {})


def test_ratio_is_the_median_of_per_repetition_ratios():
    # Ours 2, 20, 9 over theirs 1, 2, 3: ratios 2, 10, 3, median 3 (the ratio
    # of the medians would be 9 / 2).
    got = results({"semidbm": [run(2), run(20), run(9)], "other": [run(1), run(2), run(3)]})
    assert got.ratio("semidbm", "other", "w") == 3
    assert got.ops("semidbm", "w") == 9


def test_reopen_ratio_is_their_time_over_ours():
    got = results({"semidbm": [run(1, 0.1)], "semidbm-0.5.1": [run(1, 2.0)]})
    assert got.ratio("semidbm", "semidbm-0.5.1", "reopen") == pytest.approx(20)


def test_a_workload_that_does_not_apply_has_no_ratio():
    got = results({"semidbm": [run(5)], "dict": [run(None)]})
    assert got.ratio("semidbm", "dict", "w") is None
    assert got.ops("dict", "w") is None
    assert got.ratio("semidbm", "absent", "w") is None


def target_rows(section):
    return [line for line in "\n".join(section).splitlines() if line.startswith("| w ")]


def test_targets_report_met_and_missed():
    got = results(
        {"semidbm": [run(30)], "slow": [run(10)], "fast": [run(60)]},
        targets=[("w", "slow", 3), ("w", "fast", 1), ("w", "gone", 1)],
    )
    rows = target_rows(compare_report.targets_section(got))
    assert rows[0].endswith("| 3.00x | yes |")
    assert rows[1].endswith("| 0.500x | **no** |")
    assert "not measured" in rows[2]


def test_strict_targets_need_more_than_the_factor():
    got = results({"semidbm": [run(10)], "same": [run(10)]}, [("w", "same", 1)], strict=True)
    assert target_rows(compare_report.targets_section(got))[0].endswith("| 1.00x | **no** |")


def test_every_preset_target_names_a_contender_and_workload_of_its_preset():
    for preset in compare.PRESETS.values():
        for workload, other, factor in preset.targets:
            assert workload in preset.workloads or workload == "reopen"
            assert other in preset.contenders
            assert factor > 0


def test_database_files_include_dbm_dumb_siblings(tmp_path):
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "data").write_bytes(b"x")
    (tmp_path / "dumb.dat").write_bytes(b"y")
    (tmp_path / "dumb.dir").write_bytes(b"z")
    (tmp_path / "dumber.dat").write_bytes(b"not ours")
    assert pagecache.database_files(str(tmp_path / "db")) == [str(tmp_path / "db" / "data")]
    assert sorted(pagecache.database_files(str(tmp_path / "dumb"))) == [
        str(tmp_path / "dumb.dat"),
        str(tmp_path / "dumb.dir"),
    ]


def test_dropping_the_cache_keeps_the_contents(tmp_path):
    data = tmp_path / "file"
    data.write_bytes(b"cached" * 1000)
    pagecache.drop(str(data))
    assert data.read_bytes() == b"cached" * 1000


# --- the terminal summary --------------------------------------------------------


def test_times_says_how_many_times_faster_or_slower():
    assert report.times(2.5) == "2.50x faster"
    assert report.times(0.25) == "4.00x slower"
    assert report.times(1) == "1.00x faster"
    assert report.times(382.4) == "382x faster"


def test_times_with_range_gives_the_least_and_greatest_ratio_in_the_medians_sense():
    assert report.times_with_range([2.0, 4.0, 3.0]) == "3.00x faster (2.00-4.00)"
    # Slower: 1/0.5 = 2 and 1/0.25 = 4 times slower.
    assert report.times_with_range([0.5, 0.25, 0.4]) == "2.50x slower (2.00-4.00)"
    assert report.times_with_range([1.5]) == "1.50x faster"


def test_aligned_blocks_fit_the_width_and_repeat_the_row_names():
    header = ["workload", "first-contender", "second-contender", "third-contender"]
    rows = [["fill", "2.00x faster", "31572x faster", "n/a"], ["read_random", "1", "22", "333"]]
    lines = report.aligned_blocks(header, rows, 50)
    assert all(len(line) <= 50 for line in lines)
    blocks = "\n".join(lines).split("\n\n")
    assert len(blocks) == 2
    for block in blocks:
        names = [line.split()[0] for line in block.splitlines()]
        assert names == ["workload", "fill", "read_random"]
        # Right-aligned: every line of a block ends in the same column.
        assert len({len(line) for line in block.splitlines()}) == 1
    assert "31572x faster" in blocks[0] and "third-contender" in blocks[1]


def classic_run(ops, reopen, keys, durability_note=None, notes=()):
    """A classic worker's result: ``ops`` per second on "w", reopen seconds, number of keys."""
    return {
        "ops_per_sec": {"w": ops},
        "reopen_seconds": reopen,
        "notes": list(notes),
        "keys": keys,
        "durability_note": durability_note,
    }


def classic_results(runs, absent=None):
    preset = presets.Preset("t", "test", "_worker.py", list(runs) + list(absent or {}), ["w"], [])
    return compare.Results(preset, runs, absent or {})


def summary_settings(repeat=3):
    return argparse.Namespace(keys=100, key_size=16, value_size=10, quick=False, repeat=repeat)


def test_the_summary_sets_semidbm_against_each_contender_and_names_the_report():
    got = classic_results(
        {
            "semidbm": [classic_run(40, 0.01, 100), classic_run(60, 0.01, 100)],
            "dbm.gnu": [classic_run(10, 0.02, 100), classic_run(20, 0.02, 100)],
            "dict": [classic_run(80, None, 100, "in memory")] * 2,
        },
        absent={"dbm.sqlite3": "not run: it needs Python 3.13"},
    )
    path = os.path.join(compare.RESULTS, "2026-01-01-000000", "preset-t.md")
    lines = compare.summary(got, summary_settings(repeat=2), path)
    rows = {
        line.split()[0]: line.split()[1:] for line in lines if line.startswith(("w ", "reopen"))
    }
    # Ratios 4 and 3 against dbm.gnu; 0.5 and 0.75 against the dict, median 0.625.
    assert rows["w"] == ["3.50x", "faster", "(3.00-4.00)", "1.60x", "slower", "(1.33-2.00)"]
    assert rows["reopen"] == ["2.00x", "faster", "(2.00-2.00)", "n/a"]
    assert "dbm.sqlite3 not run: it needs Python 3.13." in lines
    # dbm.gnu is like for like: only the dict has a note, under the heading.
    heading = next(n for n, line in enumerate(lines) if line.startswith("Not like for like"))
    assert lines.index("  dict: in memory.") > heading
    assert not any(line.startswith("  dbm.gnu") for line in lines)
    assert lines[-1] == "Full report: " + os.path.join(
        "results", "bench", "2026-01-01-000000", "preset-t.md"
    )
    assert all(len(line) <= compare_report.SUMMARY_WIDTH for line in lines[:-1])


def test_the_summary_of_every_classic_contender_fits_the_width():
    # Ratios up to about 10**9, the widest cells the table could get.
    preset = compare.PRESETS["small"]
    runs = {}
    for number, name in enumerate(presets.CLASSIC_CONTENDERS):
        run = classic_run(None, 0.001, 100)
        run["ops_per_sec"] = dict.fromkeys(preset.workloads, 31572.0 ** (number % 3))
        runs[name] = [run]
    got = compare.Results(preset, runs, {})
    lines = compare.summary(got, summary_settings(), os.path.join(compare.RESULTS, "x.md"))
    assert all(len(line) <= compare_report.SUMMARY_WIDTH for line in lines[:-1])
    # Every other contender has a column, in some block.
    headers = [line.split() for line in lines if line.startswith("workload")]
    assert len(headers) > 1
    assert [name for header in headers for name in header[1:]] == presets.CLASSIC_CONTENDERS[1:]


def test_a_contender_on_fewer_keys_is_named_and_its_reopen_has_no_ratio():
    slow = classic_run(4, 0.001, 100, "commits each set", ["deletes timed over 10 keys"])
    got = classic_results({"semidbm": [classic_run(40, 0.01, 1000)], "diskcache": [slow]})
    assert got.fewer_keys() == {"diskcache": 100}
    assert got.ratio("semidbm", "diskcache", "w") == 10
    assert got.ratio("semidbm", "diskcache", "reopen") is None
    lines = compare.summary(got, summary_settings(repeat=1), "x.md")
    note = "  diskcache: on 100 keys, not 1,000; deletes timed over 10 keys; commits each set."
    assert note in lines
    assert any("the ratio of one repetition" in line for line in lines)
    assert compare_report.chart_bars(got, "w") == [("diskcache (100 keys)", 10)]
    assert compare_report.chart_bars(got, "reopen") == []
    assert compare_report.left_out(got, "w") == []
    assert compare_report.left_out(got, "reopen") == [("diskcache", "ran on fewer keys")]


def test_a_chart_names_each_contender_it_leaves_out_with_why():
    got = classic_results(
        {"semidbm": [classic_run(40, 0.01, 100)], "dict": [classic_run(80, None, 100)]},
        absent={"dbm.gnu": "missing: No module named '_gdbm'"},
    )
    assert compare_report.left_out(got, "w") == [("dbm.gnu", "missing")]
    assert compare_report.left_out(got, "reopen") == [
        ("dict", "does not apply"),
        ("dbm.gnu", "missing"),
    ]


def test_chart_ticks_are_fewer_the_more_decades_a_side_spans():
    charts = benchmark_scripts.load("_charts")
    assert charts.ticks(1.4) == [1, 2]
    assert charts.ticks(7) == [1, 2, 5, 10]
    assert charts.ticks(60) == [1, 3, 10, 30, 100]
    assert charts.ticks(1000) == [1, 10, 100, 1000]
    assert charts.ticks(40943) == [1, 100, 10000, 1000000]
    assert [charts.tick_label(r) for r in (0.01, 1, 1000)] == [
        "100x\nslower",
        "1x\nequal",
        "1,000x\nfaster",
    ]


@pytest.mark.parametrize("preset", ["small", "c"])
def test_the_workers_report_how_a_contenders_durability_differs(preset):
    # dbm.dumb never fsyncs, in either worker; semidbm is what the others are set against.
    worker = benchmark_scripts.load("_worker")
    chosen = compare.PRESETS[preset]
    settings = compare.preset_settings(chosen, compare.parse_arguments(["--quick"]))
    dumb = compare.run_worker(chosen, "dbm.dumb", settings, seed=0)
    assert dumb["durability_note"] == worker.Dumb.durability_note
    assert "fsync" in dumb["durability_note"]
    assert compare.run_worker(chosen, "semidbm-python", settings, seed=0)["durability_note"] is None


#: A stand-in for zerodep's persistdict (which PyPI's zerodep does not ship):
#: its ``open(path, backend=...)``, a mapping of JSON values with ``flush()``
#: and ``close()``, and the backend class by whose name the worker knows it.
PERSISTDICT_STAND_IN = """
import collections.abc
import io
import json
import os


class JsonFileBackend:
    pass


class PersistDict(collections.abc.MutableMapping):
    def __init__(self, path):
        self.path = path
        self.data = {}
        if os.path.exists(path):
            with io.open(path) as stored:
                self.data = json.load(stored)

    def __getitem__(self, key):
        return json.loads(self.data[key])

    def __setitem__(self, key, value):
        self.data[key] = json.dumps(value)

    def __delitem__(self, key):
        del self.data[key]

    def __iter__(self):
        return iter(list(self.data))

    def __len__(self):
        return len(self.data)

    def flush(self):
        with io.open(self.path, "w") as stored:
            json.dump(self.data, stored)

    def close(self):
        self.flush()


def open(path, *, backend="auto"):
    assert backend in ("json", "sqlite"), backend
    return PersistDict(path)
"""


def preset_c_quick():
    """Preset c and its settings under ``--quick``."""
    chosen = compare.PRESETS["c"]
    return chosen, compare.preset_settings(chosen, compare.parse_arguments(["--quick"]))


@pytest.mark.parametrize("name", ["persistdict-json", "persistdict-sqlite"])
def test_persistdict_runs_preset_c_from_the_folder_it_was_copied_to(name, monkeypatch, tmp_path):
    (tmp_path / "persistdict.py").write_text(PERSISTDICT_STAND_IN)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path), prepend=os.pathsep)
    chosen, settings = preset_c_quick()
    result = compare.run_worker(chosen, name, settings, seed=0)
    assert set(result["ops_per_sec"]) == set(chosen.workloads)
    backend = name.split("-")[1]
    assert result["implementation"].startswith("zerodep persistdict, %s backend" % backend)
    assert "fsync" in result["durability_note"]


def test_persistdict_missing_is_reported_with_how_to_get_it(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    chosen, settings = preset_c_quick()
    reason = compare.run_worker(chosen, "persistdict-sqlite", settings, seed=0)["missing"]
    assert reason.startswith("missing: No module named 'persistdict'")
    assert "zerodep add persistdict" in reason


def test_a_persistdict_that_is_not_zerodeps_is_refused(monkeypatch, tmp_path):
    (tmp_path / "persistdict.py").write_text("PersistentDict = dict\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    chosen, settings = preset_c_quick()
    reason = compare.run_worker(chosen, "persistdict-json", settings, seed=0)["missing"]
    assert "is not zerodep's" in reason


def test_slow_contenders_run_on_their_key_limit_unless_all_keys():
    preset = compare.PRESETS["small"]
    settings = argparse.Namespace(keys=100_000, all_keys=False, quick=False)
    assert compare.contender_keys(preset, settings, "semidbm") == 100_000
    assert compare.contender_keys(preset, settings, "dbm.sqlite3") == 2_000
    settings.keys = 500
    assert compare.contender_keys(preset, settings, "dbm.sqlite3") == 500
    settings.keys, settings.all_keys = 100_000, True
    assert compare.contender_keys(preset, settings, "dbm.sqlite3") == 100_000
    # --quick shrinks the limits as it shrinks the preset (5,000 keys of 100,000).
    quick = argparse.Namespace(keys=5_000, all_keys=False, quick=True)
    assert compare.contender_keys(preset, quick, "semidbm") == 5_000
    assert compare.contender_keys(preset, quick, "dbm.sqlite3") == 100


# --- the command line and where results go -----------------------------------


def test_the_default_is_the_small_preset_in_a_new_results_directory():
    settings = compare.parse_arguments([])
    assert settings.presets == ["small"] and settings.out_dir is None
    chosen = compare.preset_settings(compare.PRESETS["small"], settings)
    assert (chosen.keys, chosen.value_size, chosen.repeat) == (100_000, 100, 3)
    quick = compare.preset_settings(compare.PRESETS["small"], compare.parse_arguments(["--quick"]))
    assert (quick.keys, quick.repeat) == (5_000, 1)
    assert compare.parse_arguments(["--preset", "all"]).presets == compare.ALL_PRESETS


@pytest.mark.parametrize(
    "arguments",
    [["--preset", "c", "--keys", "10"], ["--repeat", "0"], ["--keys", "0"], ["--value-size", "-1"]],
)
def test_bad_arguments_are_refused(arguments, capsys):
    with pytest.raises(SystemExit) as stopped:
        compare.parse_arguments(arguments)
    assert stopped.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_each_run_gets_a_directory_of_its_own(monkeypatch, tmp_path):
    monkeypatch.setattr(compare, "RESULTS", str(tmp_path / "results"))
    first = compare.results_directory(None)
    second = compare.results_directory(None)
    assert first != second
    for made in (first, second):
        assert os.path.isdir(made) and os.path.dirname(made) == str(tmp_path / "results")
        assert os.listdir(made) == []
    chosen = str(tmp_path / "chosen" / "deeper")
    assert compare.results_directory(chosen) == chosen and os.path.isdir(chosen)


def test_a_taken_name_gets_a_number(tmp_path):
    assert results_module.new_directory(str(tmp_path), "run") == str(tmp_path / "run")
    assert results_module.new_directory(str(tmp_path), "run") == str(tmp_path / "run-2")
    assert results_module.new_directory(str(tmp_path), "run") == str(tmp_path / "run-3")


def test_an_out_dir_that_cannot_be_made_stops_before_the_run(tmp_path):
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SystemExit) as stopped:
        compare.results_directory(str(tmp_path / "a-file"))
    assert "cannot make the directory for the reports" in str(stopped.value.code)


def run_main(monkeypatch, tmp_path, run_preset, write_report=None, arguments=()):
    """Run compare.main() with results under ``tmp_path`` and the given stand-ins."""
    monkeypatch.setattr(compare, "RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(compare, "run_preset", run_preset)
    if write_report:
        monkeypatch.setattr(compare, "write_report", write_report)
    monkeypatch.setattr(sys, "argv", ["compare.py", *arguments])
    with pytest.raises(SystemExit) as stopped:
        compare.main()
    return str(stopped.value.code)


def test_an_interrupted_run_leaves_no_empty_results_directory(monkeypatch, tmp_path):
    def interrupted(preset, settings):
        raise KeyboardInterrupt

    message = run_main(monkeypatch, tmp_path, interrupted)
    assert message.startswith("interrupted") and message.endswith(": none")
    assert os.listdir(tmp_path / "results") == []


def test_a_report_that_cannot_be_written_still_shows_the_summary(monkeypatch, tmp_path, capsys):
    def finished(preset, settings):
        runs = {}
        for name, ops in (("semidbm", 4), ("lmdb", 2)):
            run = classic_run(None, 0.1, 9)
            run["ops_per_sec"] = dict.fromkeys(preset.workloads, ops)
            runs[name] = [run]
        return compare.Results(preset, runs, {})

    def disk_full(*arguments):
        raise OSError(28, "No space left on device")

    message = run_main(monkeypatch, tmp_path, finished, disk_full, ["--quick"])
    assert message == "the report could not be written: [Errno 28] No space left on device"
    out = capsys.readouterr().out
    assert "Preset small" in out and "Full report" not in out


_ROOT = _BENCHMARKS.parent


@pytest.mark.skipif(
    shutil.which("git") is None or not (_ROOT / ".git").exists(),
    reason="not a git checkout (e.g. the suite runs from an installed wheel)",
)
def test_the_results_directory_is_ignored_by_git_and_holds_no_tracked_file():
    inside = os.path.join(compare.RESULTS, "2026-01-01-000000", "preset-small.md")
    ignored = subprocess.run(["git", "-C", str(_ROOT), "check-ignore", "-q", inside])
    assert ignored.returncode == 0
    tracked = subprocess.run(
        ["git", "-C", str(_ROOT), "ls-files", compare.RESULTS], capture_output=True, text=True
    )
    assert tracked.stdout == ""


# --- contenders that cannot run --------------------------------------------------


def test_dbm_sqlite3_without_a_python_3_13_is_reported_not_dropped(monkeypatch):
    monkeypatch.delenv("SEMIDBM_SQLITE3_PYTHON", raising=False)
    python, reason = compare.interpreter("dbm.sqlite3")
    if sys.version_info >= (3, 13):
        assert (python, reason) == (sys.executable, None)
    else:
        assert python is None and reason.startswith("not run:") and "3.13" in reason


@pytest.mark.skipif(
    sys.version_info >= (3, 13) or not (_BENCHMARKS / "_worker.py").exists(),
    reason="needs a Python without dbm.sqlite3 (before 3.13) and the benchmark's worker",
)
def test_a_python_without_dbm_sqlite3_is_reported_missing(monkeypatch):
    monkeypatch.setenv("SEMIDBM_SQLITE3_PYTHON", sys.executable)
    preset = compare.PRESETS["small"]
    settings = argparse.Namespace(
        keys=10, key_size=16, value_size=10, all_keys=False, quick=True, repeat=1
    )
    result = compare.run_worker(preset, "dbm.sqlite3", settings, seed=0)
    assert result["missing"].startswith("missing: No module named ")


def test_a_contender_whose_python_is_missing_is_reported_in_every_table(monkeypatch, tmp_path):
    monkeypatch.setenv("SEMIDBM_SQLITE3_PYTHON", str(tmp_path / "no-python"))
    preset = presets.Preset("t", "test", "_worker.py", ["dbm.sqlite3"], ["w"], [])
    settings = argparse.Namespace(
        keys=10, key_size=16, value_size=10, all_keys=False, quick=False, repeat=2
    )
    got = compare.run_preset(preset, settings)
    assert got.runs == {}
    assert got.absent["dbm.sqlite3"].startswith("missing: no interpreter at ")
    assert "SEMIDBM_SQLITE3_PYTHON" in got.absent["dbm.sqlite3"]
    assert got.missing_cell("dbm.sqlite3") == "missing"
    section = "\n".join(compare_report.contenders_section(got))
    assert "| dbm.sqlite3 | missing: no interpreter at " in section


# --- apt-get waits for another apt's lock ------------------------------------------


_APT_FILES = [_ROOT / "noxfile.py", _ROOT / "scripts" / "debian_unstable.py"]


@pytest.mark.skipif(
    not all(path.exists() for path in _APT_FILES + [_ROOT / "scripts" / "nox.sh"]),
    reason="not a source checkout (e.g. the suite runs from an installed wheel)",
)
def test_every_apt_get_call_waits_for_the_lock():
    calls = 0
    for path in _APT_FILES:
        for node in ast.walk(ast.parse(path.read_text())):
            words = node.args if isinstance(node, ast.Call) else getattr(node, "elts", None)
            if not isinstance(node, (ast.Call, ast.List)):
                continue
            for place, word in enumerate(words):
                if isinstance(word, ast.Constant) and word.value == "apt-get":
                    calls += 1
                    after = words[place + 1]
                    assert isinstance(after, ast.Starred), (path, node.lineno)
                    assert ast.unparse(after.value).endswith("APT_WAIT"), (path, node.lineno)
    assert calls == 4
    spec = importlib.util.spec_from_file_location("debian_unstable", _APT_FILES[1])
    debian_unstable = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(debian_unstable)
    assert debian_unstable.APT_WAIT == ["-o", "DPkg::Lock::Timeout=600"]

    shell = (_ROOT / "scripts" / "nox.sh").read_text().splitlines()
    commands = [
        line.split("#")[0]
        for line in shell
        if "apt-get" in line.split("#")[0] and not line.lstrip().startswith(("echo", "#"))
    ]
    runs = [line for line in commands if "command -v apt-get" not in line]
    assert len(runs) == 2
    for line in runs:
        assert re.search(r'apt-get -o "DPkg::Lock::Timeout=\$lock_timeout"', line), line
    assert "lock_timeout=600" in shell


# --- preset e: several processes on one database ----------------------------------


processes = benchmark_scripts.load("_processes_worker")


def own_run(ops, alone, pool):
    """A preset-e result of semidbm: ``ops`` on "w", the measurements "alone" and "pool"."""
    return {"ops_per_sec": {"w": ops}, "notes": [], "alone": alone, "pool": pool}


def alone_rates(single, update):
    """The measurement "alone": exclusive 100 ops/s, shared ``single`` and ``update``."""
    return {
        "single": {"exclusive": 100.0, "shared": single},
        "update": {"exclusive": 100.0, "shared": update},
    }


def own_results():
    """Three repetitions of semidbm: shared/exclusive 0.2, 0.3, 0.5 (single) and 1 (update)."""
    runs = [
        own_run(1, alone_rates(20.0, 100.0), {"one_process": 10.0, "workers": 20.0,
                                              "open_seconds": [0.0002, 0.0004]}),
        own_run(1, alone_rates(30.0, 100.0), {"one_process": 10.0, "workers": 15.0,
                                              "open_seconds": [0.0003, 0.0011]}),
        own_run(1, alone_rates(50.0, 100.0), {"one_process": 10.0, "workers": 18.0,
                                              "open_seconds": [0.0002, 0.0002]}),
    ]
    preset = presets.Preset("e", "test", "_processes_worker.py", ["semidbm"], ["w"], [])
    return compare.Results(preset, {"semidbm": runs}, {})


def semidbm_rows(section):
    """The table rows of semidbm in a report's ``section``."""
    return [line for line in "\n".join(section).splitlines() if line.startswith("| semidbm ")]


def test_a_ratio_cell_gives_the_median_and_the_range_of_the_repetitions():
    assert compare_report.spread_cell([2, 10, 3]) == "3.00x (2.00-10.0)"
    assert compare_report.spread_cell([4]) == "4.00x"
    assert compare_report.spread_cell(None) == "n/a"


def test_a_writer_alone_is_reported_as_the_median_shared_to_exclusive_ratio():
    rows = semidbm_rows(compare_report.alone_section(own_results()))
    # Single puts: ratios 0.2, 0.3, 0.5, median 0.3, against the target 0.25.
    assert rows[0] == (
        "| semidbm | single puts | 100 | 30 | 0.300x (0.200-0.500) | at least 0.250x | yes |"
    )
    assert rows[1].endswith("| 1.00x (1.00-1.00) | at least 0.900x | yes |")


def test_the_pool_is_reported_against_one_process_with_every_worker_open():
    rows = semidbm_rows(compare_report.pool_section(own_results()))
    # Ratios 2, 1.5, 1.8: median 1.8 meets 1.7; one open of 1.1 ms misses 1 ms.
    assert rows == [
        "| semidbm | 10 | 18 | 1.80x (1.50-2.00) | yes | 0.250 | 1.100 | **no** |"
    ]
    summary = compare_report.own_summary(own_results())
    assert summary == [
        "semidbm alone, shared/exclusive: single puts 0.300x, update() 1.00x; 2 pool "
        "workers/one process: 1.80x, opens up to 1.100 ms."
    ]


def test_the_other_presets_have_no_sections_of_their_own_measurements():
    got = results({"semidbm": [run(2)], "other": [run(1)]})
    assert compare_report.alone_section(got) == compare_report.pool_section(got) == []
    assert compare_report.own_summary(got) == []


def test_the_fill_shares_cover_every_key_once_and_the_mixed_puts_stay_in_their_share():
    keys = [b"%016d" % n for n in range(103)]
    values = [b"v%d" % n for n in range(103)]
    fill = processes.fill_plan(keys, values)
    assert len(fill.operations) == processes.PROCESSES
    assert sorted(op for work in fill.operations for op in work) == list(zip(keys, values))
    assert fill.expected == dict(zip(keys, values))
    mixed = processes.mixed_plan(keys, values, 2000, seed=1)
    owners = processes.shares(len(keys))
    puts = 0
    for work, share in zip(mixed.operations, owners):
        mine = {keys[n] for n in share}
        written = [key for key, value in work if value is not None]
        assert set(written) <= mine
        puts += len(written)
    # About 10% puts (8,000 operations: 800 expected).
    assert 650 < puts < 950
    # The expected state: each key's last put, or its fill value.
    last = dict(zip(keys, values))
    for work in mixed.operations:
        last.update((key, value) for key, value in work if value is not None)
    assert mixed.expected == last != dict(zip(keys, values))
    assert processes.mixed_plan(keys, values, 2000, seed=1).operations == mixed.operations


def preset_e_settings():
    return argparse.Namespace(all_keys=False, quick=True, repeat=1)


def test_a_store_without_a_lock_between_processes_is_reported_as_unable():
    preset = presets.Preset("e", "test", "_processes_worker.py", ["dbm.dumb"], ["w"], [])
    got = compare.run_preset(preset, preset_e_settings())
    assert got.runs == {}
    assert got.absent["dbm.dumb"].startswith("cannot: no lock between processes")
    assert got.missing_cell("dbm.dumb") == "cannot"
    table = "\n".join(compare_report.speed_sections(got, 1))
    assert "| w | cannot |" in table


def test_gdbm_refuses_a_second_writer_process_and_is_reported_with_its_error():
    pytest.importorskip(
        "dbm.gnu", reason="this Python has no dbm.gnu (Debian's own has it with python3-gdbm)"
    )
    preset = presets.Preset("e", "test", "_processes_worker.py", ["dbm.gnu"], ["w"], [])
    reason = compare.run_preset(preset, preset_e_settings()).absent["dbm.gnu"]
    assert reason.startswith("cannot: a second writer process is refused: ")
    # The error names the database by its file name, not the temporary directory.
    assert reason.endswith("'probe'") and "semidbm-bench-" not in reason


def test_a_store_that_lets_a_second_writer_in_is_not_reported_as_refusing(monkeypatch, tmp_path):
    # The second process is spawned: it imports the worker by its name, as a script's child does.
    monkeypatch.syspath_prepend(str(_BENCHMARKS))
    monkeypatch.setitem(sys.modules, "_processes_worker", processes)
    # A plain file opened for appending: any number of processes may.
    appending = functools.partial(open, mode="a")
    assert processes.second_writer_refusal(appending, str(tmp_path / "file")) is None


@pytest.mark.parametrize("name", ["semidbm", "semidbm-python"])
def test_a_quick_run_of_preset_e_times_every_workload_and_measurement(name):
    if name == "semidbm" and semidbm.implementation != "cython":
        pytest.skip("needs the compiled kernel; this install runs the pure-Python one")
    preset = compare.PRESETS["e"]
    started = time.monotonic()
    result = compare.run_worker(preset, name, preset_e_settings(), seed=0)
    assert time.monotonic() - started < 30
    assert result["keys"] == presets.PROCESS_SIZES[True]["fill"]
    assert set(result["ops_per_sec"]) == set(preset.workloads)
    assert all(rate > 0 for rate in result["ops_per_sec"].values())
    assert result["notes"] == [processes.SharedSemidbm.note]
    for way in compare_report.ALONE_WAYS:
        assert result["alone"][way]["exclusive"] > 0 and result["alone"][way]["shared"] > 0
    assert result["pool"]["one_process"] > 0 and result["pool"]["workers"] > 0
    assert len(result["pool"]["open_seconds"]) == processes.POOL_WORKERS
    # The report has the rows of both measurements for it.
    got = compare.Results(preset, {name: [result]}, {})
    sections = compare_report.alone_section(got) + compare_report.pool_section(got)
    rows = [line for line in "\n".join(sections).splitlines() if line.startswith("| %s |" % name)]
    assert len(rows) == 3
