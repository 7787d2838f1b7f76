"""The memoize benchmark (benchmarks/cache.py): its arithmetic, and a run at tiny sizes."""

import pytest

from .support import benchmark_scripts

pytestmark = pytest.mark.tooling

pytest.importorskip("diskcache")


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/cache.py as a module (it imports its neighbours by their plain names)."""
    monkeypatch.syspath_prepend(str(benchmark_scripts.BENCHMARKS))
    return benchmark_scripts.load("cache", "cache_benchmark")


def test_ratios_are_medians_of_per_repetition_ratios_and_targets_are_checked(bench):
    runs = [
        {"semidbm": {"hit": 1e-6, "miss": 2e-6}, "diskcache": {"hit": 5e-6, "miss": 100e-6},
         "bare": 0.5e-6},
        {"semidbm": {"hit": 1e-6, "miss": 2e-6}, "diskcache": {"hit": 20e-6, "miss": 20e-6},
         "bare": 0.5e-6},
        {"semidbm": {"hit": 2e-6, "miss": 1e-6}, "diskcache": {"hit": 30e-6, "miss": 40e-6},
         "bare": 0.5e-6},
    ]
    rows, overhead = bench.summary(runs)
    assert rows["hit"][2] == pytest.approx(15) and rows["miss"][2] == pytest.approx(40)
    assert overhead == pytest.approx(0.5e-6)
    text = bench.table(rows, overhead, 3, 10)
    assert "hits at least 10x diskcache: met" in text
    assert "misses at least 20x diskcache: met" in text
    rows["miss"] = rows["miss"][:2] + (19.0,) + rows["miss"][3:]
    assert "misses at least 20x diskcache: MISSED" in bench.table(rows, overhead, 3, 10)


def test_a_quick_run_writes_its_reports(bench, tmp_path, capsys):
    bench.main(["--quick", "--repeat", "1", "--out-dir", str(tmp_path)])
    assert "| hit, expire=3600 |" in capsys.readouterr().out
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cache.json", "cache.md"]
