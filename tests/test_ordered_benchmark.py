"""The keys-in-order benchmark (benchmarks/ordered.py): its bounds, its ratios, a small run."""

import os
import re

import pytest

from .conftest import compiled_only
from .support import benchmark_scripts

pytestmark = pytest.mark.tooling


@pytest.fixture
def ordered(monkeypatch):
    """benchmarks/ordered.py as a module (it imports its neighbours by their plain names)."""
    monkeypatch.syspath_prepend(str(benchmark_scripts.BENCHMARKS))
    return benchmark_scripts.load("ordered", "ordered_benchmark")


@pytest.mark.parametrize("count", [4000, 20_000, 1_000_000, 1_234_567])
def test_the_prefix_holds_its_keys_and_the_range_is_inside(ordered, count):
    prefix, start, stop = ordered.bounds(count)
    keys = [ordered.key_of(number) for number in range(count)]
    assert sum(key.startswith(prefix) for key in keys) == ordered.PREFIX_KEYS
    assert start in keys and stop in keys
    assert sum(start <= key < stop for key in keys) == min(ordered.RANGE_KEYS, count // 4)


def test_a_ratio_is_the_median_of_the_repetitions_ratios(ordered):
    # Ratios 2, 0.5 and 1: median 1; the ratio of the median times (2 / 1) would be 2.
    runs = [{"open": 0.1, "range": (1.0, 2.0)}, {"open": 0.3, "range": (4.0, 2.0)},
            {"open": 0.2, "range": (1.0, 1.0)}]
    assert ordered.summary(runs) == {"open": 0.2, "range": (1.0, 2.0, 1.0)}


@compiled_only
def test_a_quick_run_reports_every_measurement(tmp_path):
    pytest.importorskip("lmdb", reason="the bench extra's lmdb is not installed")
    out = tmp_path / "out"
    result = benchmark_scripts.run("ordered.py", "--quick", "--repeat", "1", "--out-dir", out,
                                   cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("range of 5000 items vs LMDB cursor", "every key in order vs list",
                 "every item in order vs db.items"):
        assert re.search(r"^\| %s.* \| [\d.]+ \| [\d.]+ \| [\d.]+x \|$" % re.escape(name),
                         result.stdout, re.M)
    assert re.search(r"first 1000 keys of a prefix after it: [\d.]+ ms", result.stdout)
    assert (out / "report.md").read_text() == result.stdout
    assert sorted(os.listdir(tmp_path)) == ["out"]  # nothing else written where it ran
