"""compact(progress=...): when the callback is called, with what, and what it may not do."""

import os

import pytest

import semidbm
from semidbm import _checkpoint, _kernel, _settings
from semidbm import db as api
from semidbm._settings import PROGRESS_STEP
from semidbm.format import INDEX_NAME

from .conftest import compiled_only
from .support.log import records_after_start

#: Values big enough that the log spans many progress steps.
VALUE_SIZE = 300_000


def fill(database):
    """Write 40 keys, overwrite every third and delete every fifth: a log with dead records."""
    for i in range(40):
        database[b"key-%d" % i] = bytes([i]) * VALUE_SIZE
    for i in range(0, 40, 3):
        database[b"key-%d" % i] = bytes([i + 100]) * (VALUE_SIZE // 2)
    for i in range(0, 40, 5):
        del database[b"key-%d" % i]
    database.sync()


def expected_values():
    values = {b"key-%d" % i: bytes([i]) * VALUE_SIZE for i in range(40)}
    for i in range(0, 40, 3):
        values[b"key-%d" % i] = bytes([i + 100]) * (VALUE_SIZE // 2)
    for i in range(0, 40, 5):
        del values[b"key-%d" % i]
    return values


def test_progress_walks_the_old_log_to_its_end(dbopen, dbpath):
    calls = []
    with dbopen(dbpath, "c") as database:
        fill(database)
        total = os.path.getsize(dbpath / "data")
        database.compact(progress=lambda done, size: calls.append((done, size)))
        assert dict(database.items()) == expected_values()
    assert calls[-1] == (total, total)
    assert all(size == total for _, size in calls)
    done = [position for position, _ in calls]
    assert done == sorted(done) and len(set(done)) == len(done)
    # Each call but the last comes at least one step after the one before.
    steps = [later - earlier for earlier, later in zip([0] + done[:-2], done[:-1])]
    assert min(steps) >= PROGRESS_STEP
    assert len(calls) >= total // (2 * PROGRESS_STEP)


@compiled_only
def test_both_kernels_call_progress_alike(tmp_path, monkeypatch):
    # No index, so no checkpoint, is written before the compaction: both logs are alike.
    monkeypatch.setattr(_settings, "INDEX_MIN_TAIL", 1 << 40)
    calls = {}
    for name in ("python", "cython"):
        path = tmp_path / name
        with api.open_with(_kernel.load(name), path, "c") as database:
            fill(database)
            calls[name] = []
            database.compact(progress=lambda *call, into=calls[name]: into.append(call))
    assert calls["python"] == calls["cython"]
    written = {
        name: records_after_start((tmp_path / name / "data").read_bytes())
        for name in ("python", "cython")
    }
    assert written["python"] == written["cython"], "the same records after each log's start"


def test_an_empty_database_reports_its_end(dbopen, dbpath):
    calls = []
    with dbopen(dbpath, "c") as database:
        database.compact(progress=lambda *call: calls.append(call))
    assert calls == [(_checkpoint.START_SIZE, _checkpoint.START_SIZE)], "its first checkpoint's end"


def test_an_error_in_progress_abandons_the_compaction(dbopen, dbpath):
    def stop(done, total):
        if done > 2 * PROGRESS_STEP:
            raise KeyboardInterrupt

    with dbopen(dbpath, "c") as database:
        fill(database)
        before = (dbpath / "data").read_bytes()
        with pytest.raises(KeyboardInterrupt):
            database.compact(progress=stop)
        assert (dbpath / "data").read_bytes() == before
        assert sorted(set(os.listdir(dbpath)) - {INDEX_NAME}) == ["data", "lock"]
        assert dict(database.items()) == expected_values()
        database[b"after"] = b"still writable"
        database.compact()
        assert database[b"after"] == b"still writable"
        assert len(database) == len(expected_values()) + 1


def test_the_progress_callback_cannot_use_the_database(dbopen, dbpath):
    attempts = {
        "read": lambda database: database[b"key-1"],
        "contains": lambda database: b"key-1" in database,
        "length": len,
        "iterate": list,
        "write": lambda database: database.__setitem__(b"new", b"value"),
        "delete": lambda database: database.__delitem__(b"key-1"),
        "sync": lambda database: database.sync(),
        "compact": lambda database: database.compact(),
        "close": lambda database: database.close(),
    }
    refused = {}

    def meddle(done, total):
        for name, attempt in attempts.items():
            if name not in refused:
                with pytest.raises(semidbm.error, match="being compacted") as caught:
                    attempt(database)
                refused[name] = caught.value

    with dbopen(dbpath, "c") as database:
        fill(database)
        database.compact(progress=meddle)
        assert set(refused) == set(attempts)
        assert dict(database.items()) == expected_values()
        assert not database.closed
        # The writer lock was kept through the refused close().
        with pytest.raises(semidbm.error, match="locked"):
            dbopen(dbpath, "w")
    with dbopen(dbpath, "r") as database:
        assert dict(database.items()) == expected_values()
