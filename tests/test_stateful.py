"""A hypothesis state machine: random operations on a db, compared with a dict.

Besides sets, deletes (of present and missing keys), reads, syncs,
compactions and clean reopens, it simulates crashes: the data file as it
is on disk (without the unwritten buffer) is cut at a random point after
the last sync and opened as the database from then on. What must
survive is everything synced plus any later records wholly on disk;
nothing else may appear, and the db must always open.
"""

import functools
import os
import shutil
import tempfile
import warnings

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import semidbm
from semidbm import _checkpoint, _kernel, db
from semidbm._records import seal
from semidbm._settings import DEFAULT_BUFFER_SIZE

from .conftest import IMPLEMENTATIONS

pytestmark = pytest.mark.kernel_logic

keys = st.one_of(
    st.sampled_from([b"", b"a", b"b", b"key", b"\x00\xff", "é", "ключ"]),
    st.binary(max_size=12),
)
values = st.one_of(st.binary(max_size=300), st.text(max_size=30))


def as_bytes(item):
    return item.encode("utf-8") if isinstance(item, str) else item


def record_size(key, value):
    """Bytes a record takes in the log (value None for a delete)."""
    return 12 + len(key) + (0 if value is None else len(value))


class DatabaseMachine(RuleBasedStateMachine):
    """Runs one db against a dict model; subclasses name the kernel."""

    kernel_name = None

    def __init__(self):
        super().__init__()
        self.open = functools.partial(db.open_with, _kernel.load(self.kernel_name))
        self.directory = tempfile.mkdtemp(prefix="semidbm-stateful-")
        self.generation = 0
        self.model = {}
        self.synced = {}
        self.synced_size = _checkpoint.START_SIZE  # a new log: its header and first checkpoint
        self.end = _checkpoint.START_SIZE
        self.unsynced = []
        self.db = None

    def path(self):
        return os.path.join(self.directory, "db%d" % self.generation)

    @initialize(buffer_size=st.sampled_from([0, 1, 64, 4096, DEFAULT_BUFFER_SIZE]))
    def create(self, buffer_size):
        self.buffer_size = buffer_size
        self.db = self.open(self.path(), "c", buffer_size=buffer_size)

    def teardown(self):
        if self.db is not None:
            self.db.close()
        shutil.rmtree(self.directory)

    def mark_synced(self):
        self.synced = dict(self.model)
        self.synced_size = self.end
        self.unsynced = []

    @rule(key=keys, value=values)
    def set(self, key, value):
        self.db[key] = value
        key, value = as_bytes(key), as_bytes(value)
        sealing = None
        if not key and not value:  # twelve zero bytes: a put and a delete follow
            sealing = seal(self.end + 12, self.model.__contains__)
        self.model[key] = value
        self.end += record_size(key, value)
        self.unsynced.append((self.end, key, value))
        if sealing:
            filler = b"\0" * ((len(sealing) - 24) // 2)
            self.end += record_size(filler, b"")
            self.unsynced.append((self.end, filler, b""))
            self.end += record_size(filler, None)
            self.unsynced.append((self.end, filler, None))

    @rule(key=keys)
    def delete(self, key):
        present = as_bytes(key) in self.model
        try:
            del self.db[key]
        except KeyError:
            assert not present
            return
        assert present
        key = as_bytes(key)
        del self.model[key]
        self.end += record_size(key, None)
        self.unsynced.append((self.end, key, None))

    @rule(key=keys)
    def get(self, key):
        expected = self.model.get(as_bytes(key))
        assert self.db.get(key) == expected
        assert (key in self.db) == (expected is not None)

    @rule()
    def sync(self):
        self.db.sync()
        self.mark_synced()

    @rule()
    def compact(self):
        self.db.compact()
        live = _checkpoint.START_SIZE + sum(record_size(k, v) for k, v in self.model.items())
        with open(os.path.join(self.path(), "data"), "rb") as handle:
            data = handle.read()
        if len(data) != live:  # the empty record came last: it is sealed
            assert self.model.get(b"") == b"" and data[live - 12 : live] == bytes(12)
            assert data[live:] == seal(live, self.model.__contains__)
        self.end = len(data)
        self.mark_synced()

    @rule()
    def reopen(self):
        self.db.close()
        self.db = self.open(self.path(), "w", buffer_size=self.buffer_size)
        self.mark_synced()

    @rule(data=st.data())
    def crash(self, data):
        with open(os.path.join(self.path(), "data"), "rb") as handle:
            on_disk = handle.read()
        assert len(on_disk) >= self.synced_size
        cut = data.draw(st.integers(self.synced_size, len(on_disk)), label="cut")
        self.db.close()
        self.generation += 1
        os.mkdir(self.path())
        with open(os.path.join(self.path(), "data"), "wb") as handle:
            handle.write(on_disk[:cut])
        expected = dict(self.synced)
        end = self.synced_size
        for at, (record_end, key, value) in enumerate(self.unsynced):
            if record_end > cut:
                break
            if key == value == b"" and (
                at + 1 == len(self.unsynced) or self.unsynced[at + 1][0] > cut
            ):
                break  # an empty record its seal does not follow is torn
            end = record_end
            if value is None:
                del expected[key]
            else:
                expected[key] = value
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.db = self.open(self.path(), "w", buffer_size=self.buffer_size)
        assert [w.category for w in caught] == ([semidbm.TornTailWarning] if cut > end else [])
        self.model = expected
        self.end = end
        self.mark_synced()

    @precondition(lambda self: self.db is not None)
    @invariant()
    def same_contents(self):
        assert len(self.db) == len(self.model)
        assert sorted(self.db.keys()) == sorted(self.model)

    @precondition(lambda self: self.db is not None)
    @invariant()
    def same_values(self):
        for key, value in self.model.items():
            assert self.db[key] == value


for _name in IMPLEMENTATIONS:
    _machine = type("DatabaseMachine_%s" % _name, (DatabaseMachine,), {"kernel_name": _name})
    _machine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
    globals()["TestDatabase_%s" % _name] = _machine.TestCase
