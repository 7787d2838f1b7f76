"""The power-loss harness run against dbm.gnu and LMDB (``tests/harness/powerpeers.py``).

These check that the harness runs on each peer this Python has: the short
workloads recorded, a few cut points judged, trees counted. They do not
assert that the peers lose nothing: what they lose is the result, reported
in docs/RELIABILITY.md (``python -m tests.harness.powerpeers --help``).

They need Linux, root and ``/dev/fuse`` (as ``tests/test_power_loss.py``)
and the peer: dbm.gnu is in Debian's ``/usr/bin/python3`` (python3-gdbm),
which CI's test session uses, not in the pyenv Pythons; LMDB is ``pip
install lmdb``. Elsewhere they skip and say why.
"""

import random
import shutil

import pytest

from .harness import powerfs, powerloss, powerpeers

_UNAVAILABLE = powerfs.unavailable()

#: The peers' runs test the harness, not semidbm: not again on every Python.
pytestmark = [pytest.mark.slow, pytest.mark.tooling]


def _peer(name):
    """The peer ``name``, or a skip saying what is missing."""
    if _UNAVAILABLE is not None:
        pytest.skip("needs the power-loss FUSE file system: %s" % _UNAVAILABLE)
    reason = powerpeers.PEERS[name].unavailable()
    if reason is not None:
        pytest.skip(reason)
    return powerpeers.PEERS[name]


@pytest.mark.parametrize("name", sorted(powerpeers.WORKLOADS))
@pytest.mark.parametrize("store", sorted(powerpeers.PEERS))
def test_a_short_workload_at_a_few_cut_points(store, name, tmp_path):
    peer = _peer(store)
    checker = powerpeers.Checker(peer, powerloss.scratch_directory("pp-"))
    try:
        points = powerpeers.explore(powerpeers.WORKLOADS[name], peer, checker,
                                    powerloss.SAFE_RULES + powerloss.HAZARD_RULES,
                                    random.Random(name), samples=1, cuts=4,
                                    place=str(tmp_path))
    finally:
        shutil.rmtree(checker.scratch, ignore_errors=True)
    assert points == checker.counts["cut points"] == 4
    assert checker.counts["trees checked"] >= points
    assert sum(trees for trees, _ in checker.by_rule.values()) == checker.counts["trees checked"]
    assert sum(failing for _, failing in checker.by_rule.values()) <= checker.counts[
        "trees checked"]


@pytest.mark.parametrize("store", sorted(powerpeers.PEERS))
def test_the_command_prints_counts_per_workload_and_rule(store, capsys):
    _peer(store)
    assert powerpeers.main(["--store", store, "--seeds", "1", "--length", "20", "--cuts", "5",
                            "--samples", "1", "--rules", "hazard"]) == 0
    out = capsys.readouterr().out
    assert "%s, random-1:" % store in out and "%s, create:" % store in out
    assert "zeros/all" in out and "trees" in out


def test_a_tree_that_does_not_open_is_a_failure_of_its_own_kind():
    problem = "gdbm: the database is lost after the cut: it does not open: _gdbm.error: Bad magic"
    assert powerpeers.kind(problem) == "lost: it does not open: _gdbm.error: Bad magic"
    problem = ("lmdb: contents match no state after 2..3 of 3 operations; closest, after 3: "
               "b'a' is missing")
    assert powerpeers.kind(problem) == (
        "no allowed state: a key missing that every allowed state holds")
