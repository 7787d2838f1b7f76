"""The bulk operations' benchmark (benchmarks/bulk.py): its table, its arithmetic, on tiny sizes."""

import re

import pytest

from .support import benchmark_scripts

pytestmark = pytest.mark.tooling


@pytest.fixture
def bulk(monkeypatch):
    """benchmarks/bulk.py as a module (it imports its neighbours, as when run as a script)."""
    monkeypatch.syspath_prepend(str(benchmark_scripts.BENCHMARKS))
    return benchmark_scripts.load("bulk")


def test_a_ratio_is_the_median_of_the_repetitions_ratios(bulk):
    # 2/1, 20/2, 9/3: ratios 2, 10, 3, median 3 (the ratio of the medians would be 9/2).
    assert bulk.ratio([2, 20, 9], [1, 2, 3]) == 3


def test_every_way_is_timed_in_every_repetition(bulk):
    runs = bulk.run(50, 3)
    assert list(runs) == ["fill", "sets", "read", "delete"]
    assert list(runs["fill"]) == list(runs["sets"]) == list(bulk.FILLS) + ["dict.update(dict)"]
    assert list(runs["read"]) == list(bulk.READS) + ["[d[key] for key in keys]"]
    assert list(runs["delete"]) == list(bulk.DELETES) + ["loop: del d[key]"]
    for ways in runs.values():
        for seconds in ways.values():
            assert len(seconds) == 3 and all(value > 0 for value in seconds)
    for way in bulk.FILLS:  # the sets are part of the fill
        assert all(a < b for a, b in zip(runs["sets"][way], runs["fill"][way]))


def test_the_script_prints_the_table(tmp_path):
    result = benchmark_scripts.run("bulk.py", "--keys", "200", "--repeat", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.match(r"semidbm \S+ \((cython|python) kernel\), 200 keys of 16 bytes, values of "
                    r"100 bytes, median of 2$", lines[0])
    rows = lines[2:-1]
    assert len(rows) == 15  # fill 4, sets 4, read 4, delete 3
    for row in rows:
        assert re.search(r" \d+\.\d{4} +\d+\.\d\dx +\d+\.\d\dx$", row), row
    loops = [row for row in rows if not row.startswith(" ")]
    assert [row.split()[0] for row in loops] == ["fill", "sets", "read", "delete"]
    assert all(" 1.00x " in row for row in loops), "a loop's ratio to itself is 1"
    assert re.match(r"db\.get_many\(keys\) vs \[db\[key\] for key in keys\], the same list: "
                    r"\d+\.\d\dx$", lines[-1])
    assert list(tmp_path.iterdir()) == [], "the databases go in a temporary directory"
