"""The Dask benchmark (benchmarks/dask_bench.py): its data, its arithmetic, a small run."""

import importlib.util
import os
import re

import pytest

from .support import benchmark_scripts

pytestmark = pytest.mark.tooling


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/dask_bench.py as a module (it imports its neighbours by their plain names)."""
    monkeypatch.syspath_prepend(str(benchmark_scripts.BENCHMARKS))
    return benchmark_scripts.load("dask_bench", "dask_benchmark")


def test_records_are_the_same_from_any_start(bench):
    whole = bench.records(0, 2000)
    assert bench.records(1500, 1501) == whole[1500:1501]
    assert {len(key) for key, _ in whole} == {16}
    assert {len(value) for _, value in whole} == {100}
    assert whole[7][0] == b"0000000000000007"
    many = bench.records(0, 70_000)  # more than the block has places (pyarrow would share repeats)
    assert len({value for _, value in many}) == len(many)


def test_ranges_and_chunks_cover_every_record_once(bench):
    assert bench.ranges(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert bench.chunks(250_000) == [(0, 100_000), (100_000, 200_000), (200_000, 250_000)]


def test_a_ratio_is_the_median_of_per_repetition_ratios_each_way(bench):
    # Speed-ups 4, 1 and 2 (baseline over semidbm): median 2; the medians' ratio would be 3.
    times = {"write": [(8, 2), (3, 3), (6, 3)], "lookups": [(1, 1.5), (2, 2), (1, 1.1)]}
    got = bench.ratios(times)
    assert got["write"] == pytest.approx(2)
    assert got["lookups"] == pytest.approx(1.1)  # a slowdown: semidbm's time over the baseline's


def test_the_rows_say_met_or_not(bench):
    times = {
        "read vs loop": [(2.0, 1.0)],
        "read vs Parquet": [(1.0, 2.0)],
        "write": [(3.0, 1.0)],
        "lookups": [(0.0005, 0.0006)],
        "get_many": [(0.0002, 0.0004)],
    }
    rows = {row[0]: row for row in bench.target_rows(times, 1000)}
    assert rows["read vs loop"][4:] == ["2.00x", "at least 1.7x", "yes"]
    assert rows["read vs Parquet"][4:] == ["0.500x", "at least 1x", "**no**"]
    assert rows["write"][4:] == ["3.00x", "at least 1.5x", "yes"]
    # Nanoseconds a key: 0.5 ms for 1,000 keys is 500 ns.
    assert rows["lookups"][2:] == ["500", "600", "1.20x", "at most 1.2x", "yes"]
    assert rows["get_many"][4:] == ["2.00x", "none", ""]


def test_the_memory_target_counts_what_is_over_the_results(bench):
    mib = 2**20
    assert "Target: at most 4 MiB over the results (no copy of the index per worker): yes" in (
        " ".join(bench.memory_lines((10 * mib, 50 * mib, 7 * mib), 8)))
    assert "worker): **no**" in " ".join(bench.memory_lines((12 * mib, 50 * mib, 7 * mib), 8))


def test_results_size_counts_the_pairs_and_their_bytes(bench):
    assert bench.results_size([(b"k", b"v")]) > bench.results_size([]) + 2 * len(b"kv")


@pytest.mark.skipif(
    importlib.util.find_spec("dask") is None or importlib.util.find_spec("pyarrow") is None,
    reason="the Dask benchmark needs Dask and pyarrow: pip install 'semidbm[dask]'",
)
def test_a_small_run_reports_every_measurement(bench, tmp_path):
    out = tmp_path / "out"
    result = benchmark_scripts.run(
        "dask_bench.py", "--records", "200000", "--lookups", "20000", "--repeat", "1",
        "--out-dir", str(out), cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    text = (out / "dask.md").read_text()
    for name in ("read vs loop", "read vs Parquet", "write", "lookups"):
        row = r"^\| %s \| .* \| [\d.]+x \| at (least|most) [\d.]+x \| (yes|\*\*no\*\*) \|$"
        assert re.search(row % name, text, re.M), name
    assert re.search(r"Its peak rose by [\d.]+ MiB, for results of [\d.]+ MiB", text)
    assert "200,000 records, keys of 16 bytes, values of 100 bytes" in text
    charted = importlib.util.find_spec("matplotlib") is not None
    assert sorted(os.listdir(out)) == (["dask.md", "dask.png"] if charted else ["dask.md"])
    assert os.listdir(tmp_path) == ["out"]  # nothing else written where it ran
    assert result.stdout.strip() == text.strip()
