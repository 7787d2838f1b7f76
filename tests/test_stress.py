"""Stress (tests/harness/stress.py): one writer with reader threads, reader processes.

A short run per kernel: 4 seconds make every kind of event counted below
happen dozens of times or more (compactions the rarest, about 70 in 3 s on
the pure kernel); on a machine too loaded for that, the writer makes each
kind of write it has not made once past its deadline. The sanitize session runs 15 seconds under the
sanitizers on every CI run; ``python -m tests.harness.stress --seconds N``
runs longer (docs/RELIABILITY.md).
"""

import json

import pytest

from .conftest import kernel_name
from .harness import stress

SECONDS = {"cython": 4, "python": 4}


@pytest.mark.slow
def test_writer_and_readers_agree_with_the_model(kernel, tmp_path):
    name = kernel_name(kernel)
    counts, errors = stress.run(tmp_path / "db", name, SECONDS[name], readers=2)
    assert errors == []
    for what in ("sets", "deletes", "syncs", "compactions", "refreshes", "reads",
                 "reads in writer threads", "reads in reader threads", "syncs from another thread"):
        assert counts[what] > 0, (what, counts)


def test_a_writer_out_of_time_makes_each_kind_of_write_once(dbopen, tmp_path, kernel):
    dbopen(tmp_path / "db", "c").close()
    result = tmp_path / "writer.json"
    stress.writer(str(tmp_path / "db"), kernel_name(kernel), 0, 1, str(result))
    counts = json.loads(result.read_text())["counts"]
    assert {kind: counts.get(kind) for kind in stress.WRITES} == dict.fromkeys(stress.WRITES, 1)


@pytest.mark.parametrize(
    "value, problem",
    [
        (b"k1|5", "malformed"),
        (b"k2|5|" + b"x" * (5 * 7919 % 300), "never written"),
        (b"k1|5|", "never written"),
        (stress.value_of(b"k1", 3), "went back"),
    ],
)
def test_checker_catches_bad_reads(value, problem):
    checker = stress.Checker()
    checker.check(b"k1", stress.value_of(b"k1", 4))
    checker.check(b"k1", value)
    assert len(checker.errors) == 1 and problem in checker.errors[0], checker.errors
