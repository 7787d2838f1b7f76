"""Power loss (issue 14): what ``sync()`` and ``close()`` covered survives losing the page cache.

The workloads run on the recording FUSE file system of
``tests/harness/powerfs.py``; at every cut point of the short ones (a
sample for the random ones) ``tests/harness/powerloss.py`` builds each
tree a power cut may leave, opens it with both kernels, read-only and
for writing, and judges it against what the workload logged. The model
of what a disk keeps (``tests/harness/powermodel.py``) is tested first,
without FUSE.

The FUSE tests need Linux, root and ``/dev/fuse`` (nothing to install:
the harness speaks the kernel's protocol itself); elsewhere they skip
and say why. Longer runs: ``SEMIDBM_POWERLOSS_SEEDS`` (random workloads
per kernel, default 4), ``SEMIDBM_POWERLOSS_CUTS`` (cut points drawn in
each; default 0, every one) and ``SEMIDBM_POWERLOSS_LENGTH`` (steps,
default 150), or ``python -m tests.harness.powerloss --help``
(docs/POWERLOSS.md).
"""

import mmap
import os
import random
import warnings

import pytest

import semidbm
from semidbm import _checkpoint, _files, _pure, db

from .conftest import kernel_name
from .harness import powerfs, powerloss, powermodel
from .harness.powermodel import PAGE, ROOT, Disk
from .support.power_loss import needs_fuse, remove_scratch

pytestmark = pytest.mark.kernel_logic

SEEDS = int(os.environ.get("SEMIDBM_POWERLOSS_SEEDS", "4"))
CUTS = int(os.environ.get("SEMIDBM_POWERLOSS_CUTS", "0")) or None
LENGTH = int(os.environ.get("SEMIDBM_POWERLOSS_LENGTH", "150"))
#: Longer random workloads of two shared writers (one in the suite; more for a long run).
SHARED_SEEDS = int(os.environ.get("SEMIDBM_POWERLOSS_SHARED_SEEDS", "1"))


def replay(*trace, initial=None):
    disk = Disk.from_tree(initial or {})
    for op in trace:
        disk.apply(op)
    return disk


def draws(disk, data, meta, count=200):
    """The distinct trees ``count`` draws of a random rule give (as sorted reprs)."""
    rng = random.Random(5)
    return {repr(sorted(disk.crash(data, meta, rng).items())) for _ in range(count)}


# --- the model, without FUSE ---


def test_a_file_needs_its_own_fsync_and_its_directory_s():
    disk = replay(("create", ROOT, "f", 2), ("write", 2, 0, b"abc"))
    assert disk.durable_tree() == {}
    assert disk.volatile_tree() == {"f": b"abc"}
    disk.apply(("fsync", 2))
    assert disk.durable_tree() == {}, "the name is not durable before the directory's fsync"
    disk.apply(("fsync", ROOT))
    assert disk.durable_tree() == {"f": b"abc"}
    disk.apply(("write", 2, 3, b"def"))
    disk.apply(("fsync", ROOT))
    assert disk.durable_tree() == {"f": b"abc"}, "a directory's fsync syncs no file data"
    assert disk.crash("all", "durable") == {"f": b"abcdef"}


def test_initial_tree_is_durable_and_marks_change_nothing():
    disk = replay(("mark", "op 0"), initial={"d": {"x": b"1"}, "y": b""})
    assert disk.durable_tree() == disk.volatile_tree() == {"d": {"x": b"1"}, "y": b""}
    assert disk.marks == [(0, "op 0")]


def test_zeros_rule_keeps_the_new_size_without_the_data():
    disk = replay(("write", 2, 4, b"new!" * 1024), ("truncate", 2, 2), ("write", 2, 2, b"zz"),
                  initial={"f": b"0123"})
    assert disk.crash("zeros", "all")["f"] == b"01\0\0"
    disk = replay(("write", 2, 4, b"x" * 4096), initial={"f": b"0123"})
    assert disk.crash("zeros", "all")["f"] == b"0123" + bytes(4096)


def test_prefix_rule_keeps_writes_in_order_in_page_pieces():
    disk = replay(("write", 2, 4090, b"a" * 10), ("write", 2, 4100, b"b" * 5),
                  initial={"f": b"s" * 4090})
    outcomes = {tree["f"] for tree in (disk.crash("prefix", "all", random.Random(n))
                                       for n in range(100))}
    base = b"s" * 4090
    assert outcomes == {base, base + b"a" * 6, base + b"a" * 10, base + b"a" * 10 + b"b" * 5}


def test_pages_rule_may_leave_a_hole_before_data_that_reached_the_disk():
    disk = replay(("write", 2, 0, b"a" * PAGE + b"b" * PAGE + b"c" * 10), initial={"f": b""})
    outcomes = {tree["f"] for tree in (disk.crash("pages", "all", random.Random(n))
                                       for n in range(300))}
    assert b"a" * PAGE + bytes(PAGE) + b"c" * 10 in outcomes
    assert bytes(PAGE) + b"b" * PAGE + bytes(10) in outcomes
    assert b"" in outcomes
    assert all(len(outcome) in (0, 2 * PAGE + 10) for outcome in outcomes)


def test_a_rename_survives_whole_or_not_at_all():
    disk = replay(
        ("create", ROOT, "new", 3), ("write", 3, 0, b"N"), ("fsync", 3),
        ("rename", ROOT, "new", ROOT, "data"),
        initial={"data": b"old"},
    )
    assert disk.durable_tree() == {"data": b"old"}
    assert disk.volatile_tree() == {"data": b"N"}
    assert draws(disk, "durable", "subset") == {
        repr(sorted(tree.items()))
        for tree in ({"data": b"old"}, {"data": b"old", "new": b"N"}, {"data": b"N"})
    }
    disk.apply(("fsync", ROOT))
    assert draws(disk, "durable", "subset") == {repr([("data", b"N")])}


def test_a_new_directory_needs_its_parent_s_fsync():
    disk = replay(("mkdir", ROOT, "db", 2), ("create", 2, "data", 3), ("fsync", 2))
    assert disk.durable_tree() == {}
    disk.apply(("fsync", ROOT))
    assert disk.durable_tree() == {"db": {"data": b""}}


def test_matching_prefixes_and_mismatch_reports():
    operations = [(b"a", b"1"), (b"b", b"2"), (None, None), (b"c", b"3"), (b"c", None)]
    start = {b"old": b"0"}
    match = powerloss.matching_prefixes
    assert match(start, operations, {b"old": b"0", b"a": b"1"}, 0, 5) == [1]
    assert match(start, operations, {}, 0, 5) == [3, 5]
    assert match(start, operations, {}, 4, 5) == [5]
    report = powerloss.describe_mismatch(start, operations, {b"a": b"1\0"}, 0, 5)
    assert "b'a' holds a value never written" in report
    report = powerloss.describe_mismatch(start, operations, {b"a": b"\0"}, 0, 5)
    assert "all of them zeros" in report


# --- the recording file system ---


@needs_fuse
def test_the_file_system_records_what_a_disk_must_keep(tmp_path):
    mount = powerfs.Mount(tmp_path / "mnt", {"kept": b"initial"})
    with mount:
        root = mount.mountpoint
        marks = os.open(mount.marks_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(marks, b"hello")
        os.mkdir(os.path.join(root, "d"))
        fd = os.open(os.path.join(root, "d", "f"), os.O_CREAT | os.O_RDWR)
        os.write(fd, b"x" * 200_000)
        os.fdatasync(fd)
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as view:
            assert view[199_999:] == b"x"
        os.replace(os.path.join(root, "kept"), os.path.join(root, "d", "f"))
        assert os.fstat(fd).st_size == 200_000, "a file renamed over stays usable while open"
        os.ftruncate(fd, 10)
        os.close(fd)
        _files.fsync_directory(os.path.join(root, "d"))
        assert sorted(os.listdir(os.path.join(root, "d"))) == ["f"]
        with open(os.path.join(root, "d", "f"), "rb") as stream:
            assert stream.read() == b"initial"
        os.close(marks)
    names = [op[0] for op in mount.trace]
    assert names[:3] == ["mark", "mkdir", "create"]
    assert names[3:] == ["write"] * (len(names) - 7) + ["fsync", "rename", "truncate", "fsync"]
    assert sum(len(op[3]) for op in mount.trace if op[0] == "write") == 200_000
    assert max(len(op[3]) for op in mount.trace if op[0] == "write") <= powerfs.MAX_WRITE
    disk = replay(*mount.trace, initial={"kept": b"initial"})
    assert disk.volatile_tree() == {"d": {"f": b"initial"}}
    assert disk.durable_tree() == {"kept": b"initial"}, "the root was never fsynced"


# --- semidbm at every cut point ---


@needs_fuse
@pytest.mark.parametrize("name", sorted(powerloss.WORKLOADS))
def test_every_cut_point_of_a_short_workload(kernel, name, tmp_path):
    checker = powerloss.Checker(powerloss.kernels(), powerloss.scratch_directory("pl-"))
    try:
        points = powerloss.explore(powerloss.WORKLOADS[name], kernel, checker,
                                   powerloss.SAFE_RULES + powerloss.HAZARD_RULES,
                                   random.Random(name), samples=2, place=str(tmp_path))
    finally:
        remove_scratch(checker.scratch)
    assert checker.failures == [], "\n\n".join(checker.failures[:3])
    assert points >= 10 and checker.counts["trees checked"] > points


def cut_two_writers(kernel, seed, length, tmp_path):
    """Every cut point of a random workload of two shared writers, under the safe rules."""
    workload = powerloss.two_writers_workload(seed, length)
    checker = powerloss.Checker(powerloss.kernels(), powerloss.scratch_directory("pl-"))
    try:
        points = powerloss.explore(workload, kernel, checker, powerloss.SAFE_RULES,
                                   random.Random(seed), samples=2, place=str(tmp_path))
    finally:
        remove_scratch(checker.scratch)
    assert checker.failures == [], "\n\n".join(checker.failures[:3])
    assert checker.counts["trees opened"] > points // 2, checker.counts


@needs_fuse
def test_two_shared_writers_at_every_cut_point(kernel, tmp_path):
    cut_two_writers(kernel, 2, 150, tmp_path)


@needs_fuse
@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3, 3 + SHARED_SEEDS))
def test_two_shared_writers_at_every_cut_point_for_long(kernel, seed, tmp_path):
    cut_two_writers(kernel, seed, 400, tmp_path)


@needs_fuse
@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, SEEDS + 1))
def test_random_workload_cut_at_random_points(kernel, seed, tmp_path):
    workload = powerloss.random_workload(seed * 7 + len(kernel_name(kernel)), LENGTH)
    checker = powerloss.Checker(powerloss.kernels(), powerloss.scratch_directory("pl-"))
    try:
        powerloss.explore(workload, kernel, checker, powerloss.SAFE_RULES, random.Random(seed),
                          samples=2, cuts=CUTS, place=str(tmp_path))
    finally:
        remove_scratch(checker.scratch)
    assert checker.failures == [], "\n\n".join(checker.failures[:3])


@needs_fuse
def test_the_long_run_command(capsys):
    assert powerloss.main(["--seeds", "1", "--length", "30", "--cuts", "10", "--samples", "1",
                           "--kernel", "python"]) == 0
    assert "random-1, writer python" in capsys.readouterr().out


# --- the harness fails when semidbm skips an fsync ---


def _explore_mutant(kernel, workload, tmp_path):
    checker = powerloss.Checker(powerloss.kernels(), powerloss.scratch_directory("pl-"))
    try:
        powerloss.explore(powerloss.WORKLOADS[workload], kernel, checker, powerloss.SAFE_RULES,
                          random.Random(1), samples=1, place=str(tmp_path))
    finally:
        remove_scratch(checker.scratch)
    return checker.failures


@needs_fuse
def test_harness_catches_a_sync_that_does_not_fsync(kernel, tmp_path, monkeypatch):
    real_fsync = os.fsync

    def fsync_but_not_the_data_file(fd):
        if os.readlink("/proc/self/fd/%d" % fd).endswith("/db/data"):
            return  # sync() and close() return as if the data file were on the disk
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_but_not_the_data_file)
    failures = _explore_mutant(kernel, "create", tmp_path)
    assert failures, "the harness did not notice that sync() skipped the fsync"
    assert any("durable" in failure and "is missing" in failure for failure in failures)


@needs_fuse
def test_harness_catches_a_creation_without_the_directory_fsync(kernel, tmp_path, monkeypatch):
    monkeypatch.setattr(_files.Directory, "fsync", lambda self: None)
    failures = _explore_mutant(kernel, "create", tmp_path)
    assert failures, "the harness did not notice the missing directory fsync"
    assert any("does not open after the cut" in failure and "no data file" in failure
               for failure in failures)


# --- zeros and pages the disk did not write (docs/FORMAT.md, "Zero runs", "Lost pages") ---


def _before_fsync(trace, mark):
    """The trace up to the first fsync after ``mark``: its writes made, none synced."""
    start = trace.index(("mark", mark))
    end = next(i for i in range(start, len(trace)) if trace[i][0] == "fsync")
    return trace[:end]


def _zero_tail_tree(kernel, tmp_path, synced_empty_key):
    """Record a database synced, then a 4,096-byte record; cut with its size but not its data.

    Returns the tree, and what the database held at the sync.
    """

    def run(journal):
        database = journal.open("c", buffer_size=0)
        journal.put(database, b"a", b"synced")
        if synced_empty_key:
            journal.put(database, b"", b"synced value of the empty key")
        journal.sync(database)
        journal.put(database, b"b", journal.value(4096 - 13))  # a 4,096-byte record
        journal.close(database)

    workload = powerloss.Workload("zero-tail", run)
    initial, trace, journal = powerloss.record(workload, kernel, str(tmp_path))
    last = len(journal.operations) - 1
    disk = replay(*_before_fsync(trace, "op %d" % last), initial=initial)
    tree = disk.crash("zeros", "all")
    synced = disk.crash("durable", "durable")[powerloss.DB_NAME]["data"]
    assert tree[powerloss.DB_NAME]["data"] == synced + bytes(4096)
    return tree, powerloss.expected_state({}, journal.operations[:last])


def _open_tree(tree, kernel, path):
    powermodel.write_tree(tree, str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", semidbm.TornTailWarning)
        with db.open_with(kernel, path / powerloss.DB_NAME, "r") as database:
            return dict(database.items())


@needs_fuse
def test_zero_tail_is_recorded_as_the_disk_would_leave_it(kernel, tmp_path):
    tree, synced = _zero_tail_tree(kernel, tmp_path / "rec", synced_empty_key=False)
    assert synced == {b"a": b"synced"}
    data = tree[powerloss.DB_NAME]["data"]
    assert len(data) == _checkpoint.START_SIZE + 8 + 1 + 6 + 4 + 4096 and data.endswith(bytes(4096))


@needs_fuse
def test_zero_tail_after_a_sync_adds_no_phantom_empty_key(kernel, tmp_path):
    tree, synced = _zero_tail_tree(kernel, tmp_path / "rec", synced_empty_key=False)
    # Read as records, it was {b"a": b"synced", b"": b""} and a 4-byte torn tail
    # (4,096 = 341 * 12 + 4); the zero run is a torn tail (docs/FORMAT.md, "Zero runs").
    assert _open_tree(tree, kernel, tmp_path / "cut") == synced


@needs_fuse
def test_zero_tail_after_a_sync_does_not_change_the_empty_key_s_synced_value(kernel, tmp_path):
    tree, synced = _zero_tail_tree(kernel, tmp_path / "rec", synced_empty_key=True)
    # Read as records, the zeros replaced the synced value of b"" by b"".
    assert _open_tree(tree, kernel, tmp_path / "cut") == synced


@needs_fuse
def test_a_page_the_disk_did_not_write_changes_no_value(kernel, tmp_path):
    def run(journal):
        database = journal.open("c", buffer_size=0)
        journal.put(database, b"a", b"synced")
        journal.sync(database)
        journal.put(database, b"big", journal.value(3 * PAGE))
        journal.close(database)

    initial, trace, journal = powerloss.record(powerloss.Workload("hole", run), kernel,
                                               str(tmp_path / "rec"))
    disk = replay(*_before_fsync(trace, "op 1"), initial=initial)
    # The pages rule allows this tree: every page of the record written but its second one.
    tree = disk.volatile_tree()
    data = bytearray(tree[powerloss.DB_NAME]["data"])
    assert len(data) > 3 * PAGE
    data[2 * PAGE : 3 * PAGE] = bytes(PAGE)
    tree[powerloss.DB_NAME]["data"] = bytes(data)
    value = _open_tree(tree, kernel, tmp_path / "cut").get(b"big")
    written = journal.operations[1][1]
    assert value is None or value == written, "b'big' holds %d bytes never written to it" % (
        sum(1 for i in range(len(written)) if value[i : i + 1] != written[i : i + 1]))


def _ends_in_an_empty_put(journal):
    """A synced empty put that the log would end in, were it not sealed."""
    database = journal.open("c", buffer_size=0)
    journal.put(database, b"a", b"1")
    journal.put(database, b"", b"")
    journal.sync(database)
    journal.close(database)


@needs_fuse
def test_every_cut_of_an_empty_put_that_ends_the_log_under_every_rule(kernel, tmp_path):
    checker = powerloss.Checker(powerloss.kernels(), powerloss.scratch_directory("pl-"))
    try:
        powerloss.explore(powerloss.Workload("empty-last", _ends_in_an_empty_put), kernel,
                          checker, powerloss.SAFE_RULES + powerloss.HAZARD_RULES,
                          random.Random(3), samples=4, place=str(tmp_path))
    finally:
        remove_scratch(checker.scratch)
    assert checker.failures == [], "\n\n".join(checker.failures[:3])


@needs_fuse
def test_harness_catches_an_empty_put_left_unsealed(tmp_path, monkeypatch):
    # Without its seal, the synced log ends in twelve zero bytes, which the
    # reader takes for a torn tail: the synced b"" is lost, and the harness says
    # so. The pure kernel writes without it here; the compiled one builds its seal
    # in C, byte for byte the same (tests/test_lost_data.py), with no switch.
    monkeypatch.setattr(_pure, "seal", lambda offset, live: b"")
    checker = powerloss.Checker(powerloss.kernels(), powerloss.scratch_directory("pl-"))
    try:
        powerloss.explore(powerloss.Workload("empty-last", _ends_in_an_empty_put), _pure,
                          checker, powerloss.SAFE_RULES, random.Random(3), samples=1,
                          place=str(tmp_path))
    finally:
        remove_scratch(checker.scratch)
    assert any("durable" in failure and "b'' is missing" in failure
               for failure in checker.failures), checker.failures[:3]
