"""Compatibility with the original semidbm 0.5.1 from PyPI, in both directions.

From 0.5.1: ``fixtures/v051/<case>.db`` are databases 0.5.1 wrote (built
by ``fixtures/make_v051_fixtures.py`` from ``support/v051_cases.py``). Each opens
here, on every kernel, with exactly the contents its case says: torn
tails and 0.5.1's stray delete records for missing keys included.

To 0.5.1: databases written here are read by 0.5.1 itself, run in a
subprocess with the interpreter ``SEMIDBM_V051_PYTHON`` names
(``fixtures/read_with_v051.py``), and their data files hold the bytes
0.5.1 writes for the same operations wherever FORMAT.md makes the two
the same (0.5.1 compacts in its index's order, this semidbm in the
order of the records' positions), after the checkpoint this semidbm starts
each log with: a put and a delete of one key, which 0.5.1 replays as
such and which leave it nothing.

The committed fixtures are never opened for writing: a test that writes
copies one to ``tmp_path`` first, and the read-only tests check the
fixture is byte for byte unchanged afterwards.
"""

import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import semidbm

from .support import v051_cases
from .support.log import records_after_start
from .support.records import delete_record, put_record
from .support.v051 import v051_python

pytestmark = pytest.mark.kernel_logic

CASES = v051_cases.CASES
expected = v051_cases.expected
to_bytes = v051_cases.to_bytes

FIXTURES = Path(__file__).resolve().parent / "fixtures"
V051_FIXTURES = FIXTURES / "v051"
MAKER = FIXTURES / "make_v051_fixtures.py"
READER = FIXTURES / "read_with_v051.py"

#: The data file header of format 1.1, as FORMAT.md gives it.
HEADER = b"SEMI" + struct.pack("!HH", 1, 1)

WHOLE = sorted(name for name, case in CASES.items() if not case["truncate"])
TORN = sorted(name for name, case in CASES.items() if case["truncate"])


# --- semidbm 0.5.1 in a subprocess ------------------------------------------


def run_v051(script, *args):
    """Run ``script`` with the 0.5.1 interpreter; return the CompletedProcess.

    ``PYTHONPATH`` is left out: it may point at this semidbm's sources,
    which have the same import name.
    """
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    return subprocess.run(
        [v051_python(), str(script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def read_with_v051(path):
    """The contents of the database at ``path`` as 0.5.1 reads them (bytes to bytes)."""
    result = run_v051(READER, path)
    if result.returncode != 0:
        pytest.fail("semidbm 0.5.1 could not read %s:\n%s" % (path, result.stderr))
    report = json.loads(result.stdout)
    assert report["version"] == "0.5.1"
    return {bytes.fromhex(key): bytes.fromhex(value) for key, value in report["items"].items()}


def test_v051_python_skips_without_the_variable_and_fails_under_ci(monkeypatch):
    monkeypatch.delenv("SEMIDBM_V051_PYTHON", raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="SEMIDBM_V051_PYTHON"):
        v051_python()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="SEMIDBM_V051_PYTHON"):
        v051_python()
    monkeypatch.setenv("SEMIDBM_V051_PYTHON", sys.executable)
    assert v051_python() == sys.executable


# --- the format, built independently of semidbm -----------------------------


def v051_records(data):
    """The records of a data file 0.5.1 wrote: everything after its header (checked)."""
    assert data[:8] == HEADER
    return data[8:]


def parse_records(data):
    """Split the records ``data`` (no header) into ``(key, value or None, record bytes)``."""
    records = []
    position = 0
    while position < len(data):
        key_length, value_length = struct.unpack_from("!ii", data, position)
        key = data[position + 8 : position + 8 + key_length]
        if value_length == -1:
            value = None
            end = position + 8 + key_length + 4
        else:
            value = data[position + 8 + key_length : position + 8 + key_length + value_length]
            end = position + 8 + key_length + value_length + 4
        assert end <= len(data), "record at %d runs past the end" % position
        records.append((key, value, data[position:end]))
        position = end
    return records


def strip_stray_deletes(data):
    """The records of the data file 0.5.1 wrote without its deletes of keys not in the db then."""
    live = set()
    kept = []
    for key, value, raw in parse_records(v051_records(data)):
        if value is None:
            if key not in live:
                continue
            live.remove(key)
        else:
            live.add(key)
        kept.append(raw)
    return b"".join(kept)


def model_records(ops, writer):
    """The records that the operations leave in the data file, by FORMAT.md.

    ``writer="v051"``: semidbm 0.5.1, which appends a delete record for a
    missing key and compacts in its index's order (a dict: keys in order
    of first insertion since their last delete). ``writer="ours"``: no
    stray deletes, and compaction in order of each live key's current
    record.
    """
    records = []  # (key, value), value None for a delete
    live = {}  # live key -> index of its put in records; dict order is 0.5.1's index
    for op in ops:
        kind = op[0]
        if kind == "set":
            key = to_bytes(op[1])
            live[key] = len(records)
            records.append((key, to_bytes(op[2])))
        elif kind == "del":
            key = to_bytes(op[1])
            del live[key]
            records.append((key, None))
        elif kind == "del_missing":
            if writer == "v051":
                records.append((to_bytes(op[1]), None))
        elif kind == "compact":
            if writer == "v051":
                order = list(live)
            else:
                order = sorted(live, key=live.__getitem__)
            records = [records[live[key]] for key in order]
            live = {key: number for number, key in enumerate(order)}
        else:
            raise ValueError(op)
    return b"".join(
        delete_record(key) if value is None else put_record(key, value) for key, value in records
    )


# --- helpers -----------------------------------------------------------------


def fixture_path(name):
    return V051_FIXTURES / (name + ".db")


def snapshot(directory):
    """Every path under ``directory``, relative, mapped to its bytes (None for a directory)."""
    return {
        path.relative_to(directory).as_posix(): (None if path.is_dir() else path.read_bytes())
        for path in sorted(directory.rglob("*"))
    }


def copy_fixture(name, tmp_path):
    target = tmp_path / (name + ".db")
    shutil.copytree(fixture_path(name), target)
    return target


def torn_offset(name, data):
    """Where the torn last record starts in the (truncated) fixture ``data``."""
    case = CASES[name]
    return len(data) + case["truncate"] - v051_cases.record_size(case["ops"][-1])


def read_all(db):
    """Every key and value, also checking ``len`` and ``in`` agree with iteration."""
    contents = {key: db[key] for key in db.keys()}
    assert len(db) == len(contents)
    assert all(key in db for key in contents)
    return contents


@contextlib.contextmanager
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def torn_warning_if(torn):
    return pytest.warns(semidbm.TornTailWarning) if torn else no_warnings()


def apply_ours(db, ops):
    """Do a case's operations with this semidbm."""
    for op in ops:
        kind = op[0]
        if kind == "set":
            db[op[1]] = op[2]
        elif kind == "del":
            del db[op[1]]
        elif kind == "del_missing":
            with pytest.raises(KeyError):
                del db[op[1]]
        elif kind == "compact":
            db.compact()
        else:
            raise ValueError(op)


# --- the fixtures themselves -------------------------------------------------


def test_fixture_directories_match_the_cases():
    assert sorted(path.name for path in V051_FIXTURES.iterdir()) == sorted(
        name + ".db" for name in CASES
    )
    for name in CASES:
        assert sorted(os.listdir(fixture_path(name))) == ["data"], name


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_holds_the_records_of_its_case(name):
    """The fixture's bytes are the case's records, as FORMAT.md says 0.5.1 writes them."""
    case = CASES[name]
    whole = HEADER + model_records(case["ops"], writer="v051")
    data = (fixture_path(name) / "data").read_bytes()
    assert data == whole[: len(whole) - case["truncate"]]


def test_fixtures_are_what_v051_writes(tmp_path):
    """Building the fixtures again with 0.5.1 gives the committed ones, byte for byte."""
    result = run_v051(MAKER, "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert snapshot(tmp_path) == snapshot(V051_FIXTURES)


@pytest.mark.parametrize("name", WHOLE)
def test_v051_reads_its_own_fixture(name):
    if CASES[name]["v051_can_open"]:
        assert read_with_v051(fixture_path(name)) == expected(CASES[name])
    else:
        result = run_v051(READER, fixture_path(name))
        assert result.returncode != 0
        assert "KeyError" in result.stderr


# --- 0.5.1's databases, opened here ------------------------------------------


@pytest.mark.parametrize("name", WHOLE)
def test_open_v051_fixture(dbopen, name):
    path = fixture_path(name)
    before = snapshot(path)
    want = expected(CASES[name])
    with no_warnings():
        with dbopen(path, "r") as db:
            assert read_all(db) == want
            for op in CASES[name]["ops"]:  # str keys find their UTF-8 bytes
                if op[0] == "set" and isinstance(op[1], str) and to_bytes(op[1]) in want:
                    assert db[op[1]] == want[to_bytes(op[1])]
        with dbopen(path, "r", verify_checksums=True) as db:
            assert read_all(db) == want
    assert snapshot(path) == before


@pytest.mark.parametrize("name", TORN)
def test_open_torn_v051_fixture_read_only(dbopen, name):
    path = fixture_path(name)
    before = snapshot(path)
    want = expected(CASES[name])
    with pytest.warns(semidbm.TornTailWarning):
        db = dbopen(path, "r")
    with db:
        assert read_all(db) == want
    with pytest.warns(semidbm.TornTailWarning):
        db = dbopen(path, "r", verify_checksums=True)
    with db:
        assert read_all(db) == want
    assert snapshot(path) == before


@pytest.mark.parametrize("name", TORN)
def test_write_after_torn_tail_of_v051_fixture(dbopen, name, tmp_path):
    path = copy_fixture(name, tmp_path)
    original = (path / "data").read_bytes()
    offset = torn_offset(name, original)
    assert 8 <= offset < len(original)
    want = expected(CASES[name])

    with pytest.warns(semidbm.TornTailWarning):
        db = dbopen(path, "w")
    with db:
        assert read_all(db) == want
        db[b"new key"] = b"new value"
    want[b"new key"] = b"new value"

    assert sorted(os.listdir(path)) == ["data", "data.torn-%d" % offset, "lock"]
    assert (path / ("data.torn-%d" % offset)).read_bytes() == original[offset:]
    assert (path / "data").read_bytes() == original[:offset] + put_record(b"new key", b"new value")
    with no_warnings():
        with dbopen(path, "r", verify_checksums=True) as db:
            assert read_all(db) == want


def test_verify_checksums_catches_a_flipped_byte_in_a_v051_value(dbopen, tmp_path):
    """Reading the fixtures with verify_checksums=True above really checks something."""
    path = copy_fixture("puts_and_updates", tmp_path)
    data = bytearray((path / "data").read_bytes())
    record = put_record(b"delta", b"4")
    at = data.index(record) + 8 + len(b"delta")  # the value's one byte
    data[at] ^= 0x01
    (path / "data").write_bytes(bytes(data))
    with dbopen(path, "r") as db:
        assert db[b"delta"] == b"5"
        assert db[b"alpha"] == b"uno"
    with dbopen(path, "r", verify_checksums=True) as db:
        assert db[b"alpha"] == b"uno"
        with pytest.raises(semidbm.DBMChecksumError):
            db[b"delta"]


def _append_params():
    params = []
    for name in sorted(CASES):
        for compact in (False, True):
            if not compact and not CASES[name]["v051_can_open"] and not CASES[name]["truncate"]:
                continue  # the stray delete stays: 0.5.1 cannot open it until compacted
            ending = "compact" if compact else "append"
            params.append(pytest.param(name, compact, id="%s-%s" % (name, ending)))
    return params


@pytest.mark.parametrize("name, compact", _append_params())
def test_v051_reads_v051_fixture_after_our_writes(dbopen, name, compact, tmp_path):
    """Writing to a 0.5.1 database here keeps it a 0.5.1 database.

    Compacting also makes one with stray deletes readable by 0.5.1 again.
    """
    case = CASES[name]
    path = copy_fixture(name, tmp_path)
    original = (path / "data").read_bytes()
    offset = torn_offset(name, original) if case["truncate"] else len(original)
    want = expected(case)
    changes = [("set", b"added here", b"new")]
    keys = sorted(want)
    if keys:
        changes.append(("set", keys[0], b"updated here"))
    if len(keys) > 1:
        changes.append(("del", keys[-1]))

    with torn_warning_if(case["truncate"]):
        db = dbopen(path, "w")
    apply_ours(db, changes)
    db.close(compact=compact)
    for op in changes:
        if op[0] == "set":
            want[op[1]] = op[2]
        else:
            del want[op[1]]

    data = (path / "data").read_bytes()
    if compact:  # a new log, with a checkpoint: 0.5.1 replays its put and delete
        assert sorted(raw for _, _, raw in parse_records(records_after_start(data))) == sorted(
            put_record(key, value) for key, value in want.items()
        )
    else:
        appended = b"".join(
            put_record(op[1], op[2]) if op[0] == "set" else delete_record(op[1])
            for op in changes
        )
        assert data == original[:offset] + appended
    with no_warnings():
        with dbopen(path, "r") as db:
            assert read_all(db) == want
    assert read_with_v051(path) == want


# --- this semidbm's databases, opened by 0.5.1 ---------------------------------


@pytest.mark.parametrize("variant", ["default", "buffer_size_0", "close_compact", "shared"])
@pytest.mark.parametrize("name", WHOLE)
def test_v051_reads_what_we_write(dbopen, name, variant, tmp_path):
    """Also what a shared writer writes (flag 'cm', another shared writer open beside it)."""
    case = CASES[name]
    path = tmp_path / "ours.db"
    want = expected(case)
    ops = case["ops"]
    if variant == "buffer_size_0":
        db = dbopen(path, "c", buffer_size=0)
        apply_ours(db, ops)
        # Every record is in the file before close, where 0.5.1 can read it.
        assert records_after_start((path / "data").read_bytes()) == model_records(ops, "ours")
        assert read_with_v051(path) == want
        db.close()
    elif variant == "shared":
        with dbopen(path, "cm") as db, dbopen(path, "wm"):
            apply_ours(db, ops)
    else:
        db = dbopen(path, "c")
        apply_ours(db, ops)
        db.close(compact=(variant == "close_compact"))
        if variant == "close_compact":
            ops = ops + [("compact",)]
    assert records_after_start((path / "data").read_bytes()) == model_records(ops, "ours")
    assert read_with_v051(path) == want


@pytest.mark.parametrize("name", WHOLE)
def test_our_data_file_is_v051s(dbopen, name, tmp_path):
    """For the same operations, the data file has the bytes 0.5.1 wrote, past its log start.

    Less 0.5.1's stray deletes, which FORMAT.md forbids writers here to
    write; the header is the same, then this log's id (checked). Where a
    compaction moved records, 0.5.1's index order and the format's record
    order differ; then only the set of records is the same.
    """
    ops = CASES[name]["ops"]
    path = tmp_path / "ours.db"
    with dbopen(path, "c") as db:
        apply_ours(db, ops)
    ours = records_after_start((path / "data").read_bytes())
    theirs = strip_stray_deletes((fixture_path(name) / "data").read_bytes())
    same_order = model_records(ops, writer="ours") == strip_stray_deletes(
        HEADER + model_records(ops, writer="v051")
    )
    if same_order:
        assert ours == theirs
    else:
        assert ours != theirs
        assert sorted(raw for _, _, raw in parse_records(ours)) == sorted(
            raw for _, _, raw in parse_records(theirs)
        )


def test_compacted_case_has_orders_that_differ():
    """The "compacted" case does exercise 0.5.1's other compaction order."""
    ops = CASES["compacted"]["ops"]
    assert model_records(ops, writer="ours") != model_records(ops, writer="v051")
    ops = CASES["compacted_same_order"]["ops"]
    assert model_records(ops, writer="ours") == model_records(ops, writer="v051")


@pytest.mark.parametrize("buffer_size", [0, 1 << 20])
def test_v051_reads_an_empty_put_with_its_seal(dbopen, buffer_size, tmp_path):
    # The put and delete after b"" = b"" (docs/FORMAT.md, "Zero runs") are ordinary
    # records to 0.5.1, written and compacted alike.
    path = tmp_path / "ours.db"
    with dbopen(path, "c", buffer_size=buffer_size) as db:
        db[b"\0"] = b"held, so the seal's key is longer"
        db[b""] = b""
        want = {b"\0": b"held, so the seal's key is longer", b"": b""}
        assert read_with_v051(path) == (want if buffer_size == 0 else {})
        db.sync()
        assert read_with_v051(path) == want
        del db[b"\0"]
        db.compact()
        assert (path / "data").read_bytes().endswith(delete_record(b"\0"))
        assert read_with_v051(path) == {b"": b""}


# --- format 2.0 (docs/FORMAT.md, "Batches") ---------------------------------


def _batched(dbopen, path):
    """A database of format 2.0 with a batch; its contents."""
    with dbopen(path, "c", format=2) as db:
        db[b"a"] = b"1"
        with db.batch() as batch:
            batch[b"b"] = b"2" * 30
            del batch[b"a"]
            batch[b"c"] = b"3"
    return {b"b": b"2" * 30, b"c": b"3"}


def test_v051_refuses_format_2_with_its_own_error(dbopen, tmp_path):
    path = tmp_path / "v2.db"
    _batched(dbopen, path)
    result = run_v051(READER, path)
    assert result.returncode != 0
    assert "Incompatible file version (got: v2, can handle: v1)" in result.stderr


def test_v051_misreads_a_batch_under_a_1_1_header(dbopen, tmp_path):
    # Why batches took a new major version: 0.5.1 reads any 1.x file, and
    # takes the batch's -2 for a value length. It then stops with an error
    # that names nothing, or reads other contents.
    path = tmp_path / "v2.db"
    contents = _batched(dbopen, path)
    data = (path / "data").read_bytes()
    (path / "data").write_bytes(HEADER + data[len(HEADER) :])
    result = run_v051(READER, path)
    assert "Incompatible" not in result.stderr
    if result.returncode == 0:
        assert read_with_v051(path) != contents
    else:
        assert result.stderr.rstrip().endswith("DBMLoadError")  # no message at all
    with pytest.raises(semidbm.DBMLoadError, match="value length -2"):
        dbopen(path, "r")


def test_v051_reads_what_a_compaction_back_to_1_1_writes(dbopen, tmp_path):
    path = tmp_path / "v2.db"
    contents = _batched(dbopen, path)
    with dbopen(path, "w") as db:
        db.compact(format=1)
    assert (path / "data").read_bytes()[: len(HEADER)] == HEADER
    assert read_with_v051(path) == contents
