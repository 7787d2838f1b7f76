"""The zero-copy reads benchmark (benchmarks/views.py): its arithmetic, and a run at tiny sizes."""

import os
import re

import pytest

from .conftest import compiled_only
from .support import benchmark_scripts

pytestmark = pytest.mark.tooling


@pytest.fixture
def views(monkeypatch):
    """benchmarks/views.py as a module (it imports its neighbours by their plain names)."""
    monkeypatch.syspath_prepend(str(benchmark_scripts.BENCHMARKS))
    return benchmark_scripts.load("views", "views_benchmark")


def test_the_ratio_is_the_median_of_per_repetition_ratios(views):
    # Ratios 5, 1 and 3: median 3; the ratio of the medians (4 ms / 2 ms) would be 2.
    rows = views.summary({"touch": [(0.010, 0.002), (0.004, 0.004), (0.003, 0.001)]})
    assert rows["touch"] == pytest.approx((4, 2, 3))


def test_the_table_says_whether_the_touch_target_was_met(views):
    rows = {"touch": (3.0, 0.25, 12.0), "hash": (2.0, 1.0, 2.0)}
    text = views.table(rows, 5, (1000, 100_000), 500)
    assert "| touch | 3.00 | 0.25 | 12.00x |" in text
    assert text.endswith("touch target (at least 10x): met")
    rows["touch"] = (3.0, 0.5, 6.0)
    assert views.table(rows, 5, (1000, 100_000), 500).endswith("(at least 10x): MISSED")


def test_touch_reads_one_byte_of_each_page_either_way(views):
    value = bytes(range(256)) * 64  # 16 KiB: four pages
    assert views.touch(value) == views.touch(memoryview(value)) == bytes([0, 0, 0, 0])
    assert len(views.touch(value[1:])) == 4


@compiled_only
def test_a_quick_run_prints_every_measurement(tmp_path):
    result = benchmark_scripts.run("views.py", "--quick", "--repeat", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("touch", "hash", "objects cold", "objects warm"):
        assert re.search(r"^\| %s \| [\d.]+ \| [\d.]+ \| [\d.]+x \|$" % name, result.stdout, re.M)
    assert "preset b: 100 values of 100000 bytes; preset d: 10 objects" in result.stdout
    assert os.listdir(tmp_path) == []  # nothing written where it ran
