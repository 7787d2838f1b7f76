"""Shared writers against a model: 4 writer processes and 2 readers (tests/harness/shared.py).

A short run per kernel and one with the kernels mixed in the normal
suite; docs/RELIABILITY.md has the command for long ones. The checker's own tests show that
each of its checks fails on the history it must refuse.
"""

import os

import pytest

from .conftest import compiled_only, kernel_name
from .harness import shared

posix_only = pytest.mark.skipif(os.name != "posix", reason="shared writers need flock")

#: How long the suite's runs last: long enough for thousands of turns and every kind of
#: operation, compactions included.
SECONDS = 3.0
#: What every run must have done, for its checks to mean something.
DONE = ("turns", "modify", "delete (KeyError)", "delete_many", "delete_many (KeyError)",
        "update", "pop", "setdefault", "get", "compact", "sync", "refresh", "snapshots")


def run_and_check(tmp_path, kernels, seconds, seed):
    counts = shared.run(tmp_path / "db", kernels, seconds, seed)
    assert [name for name in DONE if counts[name] == 0] == [], counts


@pytest.mark.slow
@posix_only
def test_shared_writers_and_readers_agree_with_the_model(kernel, tmp_path):
    run_and_check(tmp_path, [kernel_name(kernel)] * 6, SECONDS, seed=len(kernel_name(kernel)))


@pytest.mark.slow
@posix_only
@compiled_only
def test_shared_writers_of_both_kernels_agree_with_the_model(tmp_path):
    run_and_check(tmp_path, ["cython", "python"] * 3, SECONDS, seed=3)


# --- the checker refuses what it must ---


def turn(seq, operations, kind="locked", returned=0.0):
    return {"seq": seq, "kind": kind, "operations": operations, "t": returned}


def test_turns_numbered_twice_or_with_a_gap_are_refused():
    with pytest.raises(shared.Failure, match=r"taken twice: \[2\]"):
        shared.Turns([turn(1, []), turn(2, []), turn(2, [])])
    with pytest.raises(shared.Failure, match="a gap"):
        shared.Turns([turn(1, []), turn(3, [])])


def test_a_wrong_answer_is_refused():
    put = ["put", ["s1", "0.1:"], None]
    shared.Turns([turn(1, [put]), turn(2, [["delete", ["s1"], None]])])
    with pytest.raises(shared.Failure, match="turn 2 .*delete"):
        shared.Turns([turn(1, [put]), turn(2, [["delete", ["s1"], "KeyError"]])])
    with pytest.raises(shared.Failure, match="turn 2 .*modify"):
        shared.Turns([turn(1, [put]), turn(2, [["modify", ["s1", "0.2:"], "0.0:"]])])
    with pytest.raises(shared.Failure, match="batch get"):
        shared.Turns([turn(1, [put, ["get", ["s1"], "0.1:"]]),
                      turn(2, [["put", ["s1", "0.3:"], None], ["get", ["s1"], "0.3:"]], "batch")])


def reader_sees(*snapshots):
    """Check a reader's snapshots against writer 0's history below."""
    turns = shared.Turns([
        turn(1, [["put", ["s1", "0.1:"], None], ["put", ["s2", "0.2:"], None]], returned=1.0),
        turn(2, [["put", ["s1", "0.3:"], None], ["put", ["s2", "0.4:"], None]], "batch", 2.0),
        turn(3, [["delete", ["s1"], None]], returned=3.0),
    ])
    singles = {0: shared.Singles(0, [
        {"operation": ["update", [["p0.1", "0.5:"], ["p0.2", "0.6:"]], None], "t": 1.5},
        {"operation": ["delete", ["p0.1"], None], "t": 2.5},
    ])}
    shared.check_reader([{"t": t, "items": items} for t, items in snapshots], turns, singles)


def test_a_reader_may_see_part_of_a_locked_turn_and_of_an_update():
    reader_sees(
        (0.5, {"s1": "0.1:"}),
        (1.2, {"#seq": "1", "s1": "0.1:", "s2": "0.2:", "p0.1": "0.5:"}),
        (2.6, {"#seq": "2", "s1": "0.3:", "s2": "0.4:", "p0.2": "0.6:"}),
    )


def test_a_reader_refuses_what_no_history_explains():
    one = {"#seq": "1", "s1": "0.1:", "s2": "0.2:"}
    with pytest.raises(shared.Failure, match="no state of turn 1"):  # half a batch
        reader_sees((1.2, dict(one, s1="0.3:")))
    with pytest.raises(shared.Failure, match="no state of turn 1"):  # never written
        reader_sees((1.2, dict(one, s2="0.9:")))
    with pytest.raises(shared.Failure, match="saw turn 1, after turn 2"):  # back in time
        reader_sees((1.2, {"#seq": "2", "s1": "0.3:", "s2": "0.4:"}), (1.3, one))
    with pytest.raises(shared.Failure, match="saw turn 1, after turn 2"):  # missed a return
        reader_sees((2.2, one))
    with pytest.raises(shared.Failure, match="keys of writer 0"):  # a deleted key back
        reader_sees((2.6, dict(one, **{"#seq": "2", "s1": "0.3:", "s2": "0.4:",
                                       "p0.1": "0.5:", "p0.2": "0.6:"})))
