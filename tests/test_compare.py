"""The comparison benchmark's arithmetic and file handling (benchmarks/compare.py, _pagecache.py).

The benchmark itself runs in CI as ``scripts/nox.sh -s bench -- --quick``; these
tests pin what its report claims: which ratios it quotes and whether a
target counts as met.
"""

import importlib.util
import pathlib

import pytest

_BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, _BENCHMARKS / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compare = _load("compare")
pagecache = _load("_pagecache")


def run(ops, reopen=None):
    """A worker result with ``ops`` per second for the workload "w" and reopen seconds."""
    return {"ops_per_sec": {"w": ops}, "reopen_seconds": reopen, "notes": []}


def results(runs, targets=(), strict=False):
    preset = compare.Preset("t", "test", "_worker.py", list(runs), ["w"], list(targets), strict)
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
    rows = target_rows(compare.targets_section(got))
    assert rows[0].endswith("| 3.00x | yes |")
    assert rows[1].endswith("| 0.500x | **no** |")
    assert "not measured" in rows[2]


def test_strict_targets_need_more_than_the_factor():
    got = results({"semidbm": [run(10)], "same": [run(10)]}, [("w", "same", 1)], strict=True)
    assert target_rows(compare.targets_section(got))[0].endswith("| 1.00x | **no** |")


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
