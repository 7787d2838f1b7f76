"""Power loss and the index file: it is missing, stale or right, never wrong.

``tests/test_power_loss.py`` runs every workload of
``powerloss.WORKLOADS`` at every cut point with each kernel writing,
the ``index`` workload among them, and ``powerloss.check_index`` judges
the index file of every tree. Here: what the ``index`` workload
exercises, under the hazard rules too; mutations of the index file's write
protocol, which the harness must report; and trees with a wrong index file
made by hand, which the check must report whether or not the kernels'
readings show it. docs/POWERLOSS.md, "The index file", has the
counts.
"""

import os
import random

import pytest

from semidbm import _files, _index_file, db
from semidbm.format import INDEX_TEMP_NAME

from .conftest import compiled_only
from .harness import powerloss
from .support import index_format
from .support.power_loss import needs_fuse, remove_scratch

pytestmark = pytest.mark.kernel_logic

#: Every rule, the safe ones and the hazard ones.
ALL_RULES = powerloss.SAFE_RULES + powerloss.HAZARD_RULES
#: The safe rules as ``Checker.kinds`` names them.
SAFE = {"%s/%s" % rule for rule in powerloss.SAFE_RULES}
WRONG = powerloss.INDEX_PROBLEM + powerloss.INDEX_WRONG
INVALID = powerloss.INDEX_PROBLEM + powerloss.INDEX_INVALID


def _explore(kernel, rules, tmp_path):
    """Every cut point of the ``index`` workload under ``rules``; the Checker, with its findings."""
    checker = powerloss.Checker(powerloss.kernels(), powerloss.scratch_directory("pl-"))
    try:
        powerloss.explore(powerloss.WORKLOADS["index"], kernel, checker, rules,
                          random.Random(1), samples=2, place=str(tmp_path))
    finally:
        remove_scratch(checker.scratch)
    return checker


def _index_kinds(checker):
    """``{(kind, rule): failing trees}`` of the index file problems the checker found."""
    return {key: number for key, number in checker.kinds.items()
            if key[0].startswith(powerloss.INDEX_PROBLEM)}


def _data_lost(checker):
    """The kinds of failure under the safe rules that lose data or the database."""
    return {key for key in checker.kinds if key[1] in SAFE and any(
        word in key[0] for word in ("missing", "does not open"))}


# --- the index workload ---


@needs_fuse
@compiled_only
def test_index_workload_exercises_indexes_and_none_is_wrong(kernel, tmp_path):
    """Under every rule, hazards too: the index file is only ever written whole, after the log."""
    checker = _explore(kernel, ALL_RULES, tmp_path)
    assert _index_kinds(checker) == {}, "\n\n".join(checker.failures[:3])
    counts = checker.counts
    assert counts["index trusted and stale"] > 0, counts
    assert counts["no index"] > 0, counts  # before the first index, or after a compaction
    if powerloss.is_compiled(kernel):
        assert counts["index trusted"] > counts["index trusted and stale"], counts
        assert counts["index.new left over"] > 0, counts


# --- mutations of the write protocol ---


@needs_fuse
@compiled_only
def test_harness_catches_an_index_renamed_before_its_own_fsync(tmp_path, monkeypatch):
    """``index.new`` not fsynced before its rename: what reaches the disk may be any part of it.

    Under the safe rules the index file is then short or empty: not trusted,
    so no data is lost, but the check reports it. Under the ``pages``
    rule its header may reach the disk and its slots not: trusted, and
    wrong; the compiled kernel drops it at the first use of the block
    (its CRC-32 fails), so the kernels still read alike there, and only
    the check sees it.
    """
    real_fsync = os.fsync

    def fsync_but_not_the_new_index(fd):
        if os.readlink("/proc/self/fd/%d" % fd).endswith("/db/" + INDEX_TEMP_NAME):
            return
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_but_not_the_new_index)
    checker = _explore(powerloss.kernels()["cython"], ALL_RULES, tmp_path)
    kinds = _index_kinds(checker)
    assert any(name == INVALID and rule in SAFE for name, rule in kinds), kinds
    assert not any(name == WRONG and rule in SAFE for name, rule in kinds), kinds
    assert _data_lost(checker) == set(), "\n\n".join(checker.failures[:3])
    wrong = [failure for failure in checker.failures if WRONG in failure]
    assert wrong, "the pages rule left no trusted header over lost slots"
    for failure in wrong:
        assert "CRC of block" in failure and "read it differently" not in failure, failure


@needs_fuse
@compiled_only
def test_harness_catches_an_index_kept_past_the_log_it_describes(kernel, tmp_path, monkeypatch):
    """No removal before a compaction or ``'n'``: the old index file beside the new log is reported.

    Its samples or its ``covered`` then disagree with the new data file,
    so it is not trusted; the check reports it all the same.
    """
    monkeypatch.setattr(_index_file, "remove", lambda directory: None)
    checker = _explore(kernel, powerloss.SAFE_RULES, tmp_path)
    kinds = _index_kinds(checker)
    assert {name for name, _ in kinds} == {INVALID}, kinds
    assert checker.counts["index not trusted"] > 0


class _FsyncAtWait(_files.BackgroundFsync):
    """The data file's fsync made when waited for, not in a thread: after the index file's rename.

    With ``install`` no longer waiting, the trace then always holds the
    rename first, as a slow disk may order them.
    """

    def __init__(self, fd):
        self._fd = fd
        self._failure = None

    def wait(self):
        self._run()
        return self._failure


@needs_fuse
@compiled_only
def test_harness_catches_an_index_renamed_before_the_data_file_is_on_the_disk(
        tmp_path, monkeypatch):
    """The rename not waiting for the data file's fsync: an index file over lost log is reported."""
    real_install = _index_file.install

    def install_at_once(directory, data_fd, header, write_body, data_durable=None):
        return real_install(directory, data_fd, header, write_body)

    monkeypatch.setattr(_files, "BackgroundFsync", _FsyncAtWait)
    monkeypatch.setattr(_index_file, "install", install_at_once)
    checker = _explore(powerloss.kernels()["cython"], powerloss.SAFE_RULES, tmp_path)
    assert any(INVALID in failure and "covered" in failure for failure in checker.failures), (
        "\n\n".join(checker.failures[:3]))
    assert _data_lost(checker) == set()


# --- wrong index files made by hand ---


def _data_file(path, operations, start=None):
    """The data file the pure kernel writes at ``path`` for ``operations`` (``(key, value)``).

    With ``start``, the database begins as that data file (the same log,
    its id included), and the operations are appended to it.
    """
    if start is not None:
        path.mkdir()
        (path / "data").write_bytes(start)
    with db.open_with(powerloss.kernels()["python"], path, "c") as database:
        for key, value in operations:
            database[key] = value
    return (path / "data").read_bytes()


def _tree(data, index):
    return {powerloss.DB_NAME: {"data": data, "index": index}}


def _check(tree):
    """``check_index`` on ``tree``: its problems, and the names it counted."""
    counted = []
    return powerloss.check_index(tree, None, counted.append), counted


def _kernels_judge(tree, operations):
    """The harness's judgement of ``tree`` with every operation durable (both kernels' readings)."""
    checker = powerloss.Checker(powerloss.kernels(), powerloss.scratch_directory("pl-"))
    try:
        expectation = powerloss.Expectation(exists=True)
        expectation.note("op %d" % (len(operations) - 1))
        expectation.note("durable %d" % len(operations))
        return checker.judge(checker.observe(tree), expectation, {}, operations)
    finally:
        remove_scratch(checker.scratch)


OPERATIONS = [(b"k", b"old value"), (b"a", b"1"), (b"k", b"new value"), (b"", b"")]


def test_check_passes_a_right_index_and_a_stale_one(tmp_path):
    data = _data_file(tmp_path / "db", OPERATIONS)
    index = index_format.build(data).encode()
    assert _check(_tree(data, index)) == ([], ["index trusted"])
    longer = _data_file(tmp_path / "longer", [(b"b", b"after the index")], start=data)
    assert longer.startswith(data)
    assert _check(_tree(longer, index)) == ([], ["index trusted", "index trusted and stale"])
    assert _check({powerloss.DB_NAME: {"data": data}}) == ([], ["no index"])


def test_check_reports_a_trusted_index_with_a_slot_at_an_older_put(tmp_path):
    """Every check of the format passes this index; only replaying the log shows it wrong.

    The compiled kernel opens through it and reads the old value, so the
    kernels' readings differ too.
    """
    data = _data_file(tmp_path / "db", OPERATIONS)
    index = index_format.build(data)
    older = next(offset for offset, key, _, _ in index_format.records(data) if key == b"k")
    slot = index.find(data, b"k")
    index.slots[slot] = (older, index.slots[slot][1])
    tree = _tree(data, index.encode())
    problems, counted = _check(tree)
    assert counted == ["index trusted but wrong"]
    assert problems == [WRONG + ": the slots are not the live keys' last puts; "
                        "the probe for b'k' does not find its record"]
    if "cython" in powerloss.kernels():
        judged = _kernels_judge(tree, OPERATIONS)
        assert any("read it differently" in problem for problem in judged), judged


def test_check_reports_an_index_of_another_data_file_of_the_same_length(tmp_path):
    """An index of the same keys laid out otherwise: another checkpoint, so it is not trusted."""
    data = _data_file(tmp_path / "db", [(b"k1", b"x" * 10), (b"k2", b"y" * 20)])
    other = _data_file(tmp_path / "other", [(b"k2", b"y" * 20), (b"k1", b"x" * 10)])
    assert len(other) == len(data) and other != data
    problems, counted = _check(_tree(data, index_format.build(other).encode()))
    assert counted == ["index not trusted"]
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        INVALID + ": the data file holds no checkpoint of that nonce there; samples")


def test_check_reports_lost_slots_that_the_kernels_read_around(tmp_path):
    """A header on the disk, its slots not (zeros): trusted at open, dropped at first use.

    What the ``pages`` rule leaves of an index file renamed before its fsync:
    the kernels read alike (the compiled kernel drops the index file when the
    block's CRC-32 fails), so only ``check_index`` reports it.
    """
    data = _data_file(tmp_path / "db", OPERATIONS)
    whole = index_format.build(data).encode()
    index = whole[: index_format.HEADER_SIZE] + bytes(len(whole) - index_format.HEADER_SIZE)
    tree = _tree(data, index)
    problems, counted = _check(tree)
    assert counted == ["index trusted but wrong"]
    assert problems[0].startswith(WRONG + ": CRC of block 0"), problems
    assert _kernels_judge(tree, OPERATIONS) == []


@pytest.mark.parametrize("cut", [0, 100, index_format.HEADER_SIZE])
def test_check_reports_an_index_cut_short(tmp_path, cut):
    """What the safe rules leave of an index file renamed before its fsync: untrusted, reported."""
    data = _data_file(tmp_path / "db", OPERATIONS)
    index = index_format.build(data).encode()[:cut]
    problems, counted = _check(_tree(data, index))
    assert counted == ["index not trusted"]
    assert len(problems) == 1 and problems[0].startswith(INVALID), problems
