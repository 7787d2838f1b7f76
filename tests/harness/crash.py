"""Crash consistency: a writer killed with SIGKILL at random moments, checked each time.

A child process opens the database and writes without end (sets,
updates, deletes of present and missing keys, periodic ``sync()`` and
``compact()``), logging each operation to a file before making it. The
parent kills it with SIGKILL after a random delay, then checks:

- the database opens (any warning but ``TornTailWarning`` is a failure);
- its contents are the state after some prefix of the logged operations,
  no shorter than the last completed ``sync()`` or ``compact()`` (with
  ``buffer_size=0``, no shorter than every operation that returned). So
  every key holds its value as of the last completed sync or a later
  logged one, and nothing never written appears;
- writes made after the recovery survive the next reopen.

The next child goes on with the same database, so torn tails meet new
writes, and a kill may land while a writer is cutting a torn tail. A
quarter of the rounds aim the kill at a compaction: the child says when
one starts and the parent kills within the time compactions take.

The ``index`` workload (the compiled kernel) aims at the persistent
index file instead: values of a few kilobytes, so that the log past the
index soon reaches the bound at which ``close()`` writes a new one, and
writers that close and reopen. The aimed rounds write past the bound
and then close or compact, so the kill lands in the index file write. Each
check also reads the database with the pure-Python kernel, which never
uses the index file, and requires the same contents; requires that an
``index`` left by the kill is valid for the data file as it is
(tests/support/index_format.py checks it against docs/FORMAT.md); and requires
that the next writer removes a leftover ``index.new``.

The ``batch`` workload writes a database of format 2 mostly in batches
(``Database.batch``) of up to 40 changes, some larger than the write
buffer (written straight, so a kill can cut one anywhere): the state
after the kill must be one where every batch happened whole or not at
all. Some batches are large: over a write buffer of records that each
end on a page boundary of the file, where a kill during their write
cuts them (the system copies a page, or a folio of pages, at a time); half the aimed rounds
kill within such a batch's write. What the kill leaves then ends with
whole records of the batch, and must open as a torn tail.

Run ``python -m tests.harness.crash --help`` from the repository root
for long runs; the test suite runs a few hundred kills
(tests/test_crash.py).
"""

import argparse
import collections
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings

if __package__ in (None, ""):  # run as a script: the child writer
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import semidbm
from semidbm import _kernel, db
from semidbm.format import COMPACT_NAME, DEFAULT_BUFFER_SIZE, torn_tail_limit

try:
    from ..support import index_format
except ImportError:  # run as a script: the child writer, which needs none of it
    index_format = None

#: Keys the writer picks from: small enough that updates and deletes are common.
KEYSPACE = 1500
#: What the ``index`` workload writes before an aimed close or compaction: past the
#: 4 MiB of uncovered log at which a writer writes a new index file.
INDEX_AIM_BYTES = (4 << 20) + (256 << 10)
WORKLOADS = ("default", "index", "batch", "shared")
#: How many shared writers the ``shared`` workload runs at once.
SHARED_WRITERS = 3
#: The harness's own test (tests/test_batch.py): the ``batch`` workload with each batch's
#: changes written one at a time, which the checks must catch.
SPLIT_BATCHES = "split-batch"
#: The most changes the ``batch`` workload puts in a batch.
BATCH_CHANGES = 40
#: The size of the file's pages, at which a kill during a write cuts it.
PAGE = 4096
#: How many pages a large batch's records fill: past the default buffer by more than 2 MiB,
#: so that a cut at a boundary of the 2 MiB folios Linux may copy at a time lies past it.
LARGE_BATCH_PAGES = ((DEFAULT_BUFFER_SIZE + (2 << 20)) // PAGE + 8, (4 << 20) // PAGE)
#: Within how long after it says so the parent kills a writer committing a large batch:
#: about the time the commit takes (a copy of its records and their write).
LARGE_BATCH_SECONDS = 0.004


def value_of(seed, size):
    """The value a write with ``seed`` stores: ``size`` bytes that name the seed."""
    unit = b"%x." % seed
    return (unit * (size // len(unit) + 1))[:size]


def value_size(rng):
    """Mostly small values, some large, a few larger than the default buffer."""
    roll = rng.random()
    if roll < 0.70:
        return rng.randrange(0, 100)
    if roll < 0.96:
        return rng.randrange(100, 4000)
    if roll < 0.998:
        return rng.randrange(4000, 100_000)
    return rng.randrange(DEFAULT_BUFFER_SIZE + 1, DEFAULT_BUFFER_SIZE * 3 // 2)


def index_value_size(rng):
    """The ``index`` workload's values: a few kilobytes, so the log grows fast; some tiny."""
    roll = rng.random()
    if roll < 0.1:
        return rng.randrange(0, 50)
    if roll < 0.995:
        return rng.randrange(1000, 9000)
    return rng.randrange(DEFAULT_BUFFER_SIZE + 1, DEFAULT_BUFFER_SIZE * 3 // 2)


# --- the child ---


def writer(path, log_path, kernel_name, buffer_size, seed, first_seed, aim_at_compaction,
           workload="default", number=0):
    """Write to the database at ``path`` until killed, logging each step first.

    The ``shared`` workload's writer ``number`` opens a shared writer
    (flag ``'cm'``) and writes keys of its own (``owner``).
    """
    rng = random.Random(seed)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def note(line):
        os.write(log, line.encode("ascii") + b"\n")

    warnings.simplefilter("ignore", semidbm.TornTailWarning)
    database = db.open_with(_kernel.load(kernel_name), path,
                            "cm" if workload == "shared" else "c", buffer_size=buffer_size)
    first_key = number * KEYSPACE
    note("ready")
    print("ready", flush=True)
    if workload == "index":
        index_writer(database, note, rng, first_seed, aim_at_compaction,
                     lambda: db.open_with(_kernel.load(kernel_name), path, "w",
                                          buffer_size=buffer_size))
    if workload in ("batch", SPLIT_BATCHES):
        batch_writer(database, note, rng, first_seed, aim_at_compaction,
                     workload == SPLIT_BATCHES, db.data_file(path))
    value_seed = first_seed
    operations = 0
    while True:
        operations += 1
        roll = rng.random()
        if aim_at_compaction and operations == 400:
            print("compacting", flush=True)
            roll = 1.0
        if roll < 0.62:
            set_one(database, note, rng, value_seed, value_size(rng), first_key)
            value_seed += 1
        elif roll < 0.994:
            delete_one(database, note, rng, first_key)
        elif roll < 0.999:
            sync(database, note)
        else:
            compact(database, note)


def set_one(database, note, rng, value_seed, size, first_key=0):
    """Set a random key to the value of ``value_seed`` and ``size``, logged first; its length.

    The keys are ``KEYSPACE`` numbers from ``first_key`` on.
    """
    key = b"k%d" % (first_key + rng.randrange(KEYSPACE))
    note("set %s %d %d" % (key.decode(), value_seed, size))
    database[key] = value_of(value_seed, size)
    return size + len(key) + 12


def delete_one(database, note, rng, first_key=0):
    """Delete a random key (present or not) of those from ``first_key`` on, logged first."""
    key = b"k%d" % (first_key + rng.randrange(KEYSPACE))
    note("del %s" % key.decode())
    try:
        del database[key]
    except KeyError:
        pass


def sync(database, note):
    """``sync()``, logged before and after."""
    note("sync")
    database.sync()
    note("synced")


def compact(database, note):
    """``compact()``, logged before and after (with its time)."""
    note("compact")
    started = time.perf_counter()
    database.compact()
    note("compacted %.6f" % (time.perf_counter() - started))


def batch_writer(database, note, rng, value_seed, aim, split, data_path):
    """The ``batch`` workload: batches of sets and deletes, some single writes, syncs, compactions.

    A batch is logged before it commits: ``batch N``, then its N changes.
    ``split``: make each batch's changes one at a time instead (``SPLIT_BATCHES``).
    An aimed round (``aim``) says, at its 100th step, what it starts: a
    compaction or a large batch (:func:`large_batch`, of the data file
    ``data_path``).
    """
    operations = 0
    while True:
        operations += 1
        roll = rng.random()
        if aim and operations == 100:
            if rng.random() < 0.5:
                value_seed = large_batch(database, note, rng, value_seed, data_path, split, True)
                continue
            print("compacting", flush=True)
            roll = 1.0
        if roll < 0.005:
            value_seed = large_batch(database, note, rng, value_seed, data_path, split)
        elif roll < 0.85:
            value_seed = one_batch(database, note, rng, value_seed, split)
        elif roll < 0.93:
            set_one(database, note, rng, value_seed, value_size(rng))
            value_seed += 1
        elif roll < 0.99:
            sync(database, note)
        else:
            compact(database, note)


class _Split(Exception):
    """Raised to discard a batch whose changes ``one_batch`` then makes one at a time."""


def large_batch(database, note, rng, value_seed, data_path, split, aim=False):
    """Commit a batch larger than the write buffer whose records end on page boundaries.

    After a ``sync()``, the log ends where the data file does, so the
    batch's first value can be sized for its record to end on a page
    boundary of the file, and every later record fills a page: a kill
    during the batch's write, which the system cuts at a page boundary,
    leaves the batch's records up to the cut whole. With ``aim``, says
    ``large batch`` just before the commit. Returns the next seed.
    """
    sync(database, note)
    keys = [b"k%d" % rng.randrange(KEYSPACE) for _ in range(rng.randrange(*LARGE_BATCH_PAGES))]
    # The batch's head, then the first record's lengths and key.
    first = os.path.getsize(data_path) + 12 + 8 + len(keys[0])
    sizes = [-(first + 4) % PAGE] + [PAGE - 12 - len(key) for key in keys[1:]]
    seeds = range(value_seed, value_seed + len(keys))
    changes = [(key, value_of(seed, size)) for key, seed, size in zip(keys, seeds, sizes)]
    with contextlib.suppress(_Split), database.batch() as batch:
        batch.update(changes)
        lines = ["set %s %d %d" % (key.decode(), seed, size)
                 for key, seed, size in zip(keys, seeds, sizes)]
        note("\n".join(["batch %d" % len(keys)] + lines))
        if aim:
            print("large batch", flush=True)
        if split:
            raise _Split
    if split:
        apply_one_at_a_time(database, changes)
    return seeds.stop


def one_batch(database, note, rng, value_seed, split):
    """Commit a batch of random sets and deletes (of keys present), logged first; the next seed.

    ``split``: discard the batch and make its changes one at a time.
    """
    lines = []
    changes = []
    with contextlib.suppress(_Split), database.batch() as batch:
        for _ in range(rng.randrange(1, BATCH_CHANGES + 1)):
            key = b"k%d" % rng.randrange(KEYSPACE)
            if rng.random() < 0.7:
                size = value_size(rng)
                changes.append((key, value_of(value_seed, size)))
                batch[key] = changes[-1][1]
                lines.append("set %s %d %d" % (key.decode(), value_seed, size))
                value_seed += 1
            else:
                try:
                    del batch[key]
                except KeyError:
                    continue
                changes.append((key, None))
                lines.append("del %s" % key.decode())
        note("\n".join(["batch %d" % len(lines)] + lines))
        if split:
            raise _Split
    if split:
        apply_one_at_a_time(database, changes)
    return value_seed


def apply_one_at_a_time(database, changes):
    """Make a split batch's ``changes`` (``(key, value or None for a delete)``) one at a time."""
    for key, value in changes:
        if value is None:
            del database[key]
        else:
            database[key] = value


def index_writer(database, note, rng, value_seed, aim, reopen):
    """The ``index`` workload: sets of kilobytes, deletes, syncs, closes, compactions.

    With ``aim``, this writer writes ``INDEX_AIM_BYTES`` (no closes or
    compactions meanwhile), then says "closing" or "compacting" and does
    that, so that the kill lands while the index file is written.
    """
    written = 0
    aimed = False
    while True:
        roll = rng.random()
        if aim and not aimed:
            if written < INDEX_AIM_BYTES:
                roll = min(roll, 0.9799)
            elif rng.random() < 0.5:
                aimed = True
                print("closing", flush=True)
                roll = 0.985
            else:
                aimed = True
                print("compacting", flush=True)
                roll = 1.0
        if roll < 0.76:
            written += set_one(database, note, rng, value_seed, index_value_size(rng))
            value_seed += 1
        elif roll < 0.95:
            delete_one(database, note, rng)
        elif roll < 0.98:
            sync(database, note)
        elif roll < 0.997:
            note("close")
            started = time.perf_counter()
            database.close()
            note("closed %.6f" % (time.perf_counter() - started))
            database = reopen()
            note("ready")
            written = 0
        else:
            compact(database, note)


# --- the parent ---


class Log:
    """What a killed writer logged: its operations and where it was."""

    def __init__(self, text):
        lines = text.split("\n")
        if lines and lines[-1] != "":
            lines.pop()  # a line cut by the kill: that step was never started
        self.operations = []  # (key, value or None for a delete)
        self.durable = 0  # operations covered by the last completed sync, close or compact
        # The numbers of operations the database may hold: not one inside a batch.
        self.boundaries = {0}
        # The operations of the last batch or write logged, which may not have returned.
        self.last_started = 0
        self.phase = "open"
        batch_left = 0
        self.compaction_seconds = []
        self.close_seconds = []
        for line in lines:
            if not line:
                continue
            word, *rest = line.split()
            in_batch = word == "batch" or batch_left > 0
            if word in ("set", "del", "batch") and not batch_left:
                self.last_started = len(self.operations)
            if word == "batch":
                batch_left = int(rest[0])
            elif word == "set":
                key, seed, size = rest
                self.operations.append((key.encode(), value_of(int(seed), int(size))))
            elif word == "del":
                self.operations.append((rest[0].encode(), None))
            if word in ("set", "del", "batch"):
                if word != "batch" and batch_left:
                    batch_left -= 1
                if not batch_left:
                    self.boundaries.add(len(self.operations))
            elif word in ("synced", "compacted", "closed"):
                self.durable = len(self.operations)
                if rest:
                    seconds = self.close_seconds if word == "closed" else self.compaction_seconds
                    seconds.append(float(rest[0]))
            self.phase = {
                "ready": "between",
                "batch": "batch",
                "set": "write",
                "del": "write",
                "sync": "sync",
                "synced": "between",
                "compact": "compact",
                "compacted": "between",
                "close": "close",
                "closed": "open",
            }[word]
            if in_batch:
                self.phase = "batch"


def long_tail(message, buffer_size):
    """True if the TornTailWarning ``message`` tells of a tail longer than a write buffer."""
    found = re.search(r"torn tail of (\d+) bytes", message)
    return found is not None and int(found.group(1)) > torn_tail_limit(buffer_size)


def read_all(kernel, path, flag="r"):
    """Open the database and return its items and the warnings opening gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with db.open_with(kernel, path, flag) as database:
            items = dict(database.items())
    return items, caught


def matching_prefixes(start, operations, recovered, low):
    """The prefix lengths p >= ``low`` whose state (``start`` + operations[:p]) is ``recovered``."""
    state = dict(start)
    for key, value in operations[:low]:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    differing = {
        key for key in state.keys() | recovered.keys() if state.get(key) != recovered.get(key)
    }
    found = [low] if not differing else []
    for position in range(low, len(operations)):
        key, value = operations[position]
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
        if state.get(key) == recovered.get(key):
            differing.discard(key)
        else:
            differing.add(key)
        if not differing:
            found.append(position + 1)
    return found


def describe_mismatch(start, operations, recovered, low):
    """Say how ``recovered`` differs from the states it may be: for a failure report."""
    written = {}
    for key, value in list(start.items()) + operations:
        if value is not None:
            written.setdefault(key, set()).add(value)
    state = dict(start)
    for key, value in operations:
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
    notes = []
    for key in sorted(state.keys() | recovered.keys()):
        if state.get(key) != recovered.get(key):
            value = recovered.get(key)
            if value is not None and value not in written.get(key, ()):
                notes.append("%r holds a value never written to it" % key)
            else:
                notes.append(
                    "%r is %s, after all logged operations %s"
                    % (key, "absent" if value is None else "%d bytes" % len(value),
                       "absent" if state.get(key) is None else "%d bytes" % len(state[key]))
                )
    return "no prefix from %d of %d operations matches: %s" % (
        low, len(operations), "; ".join(notes[:5])
    )


class Harness:
    """Kills writers of one database again and again and checks it after each kill."""

    def __init__(self, path, kernel_name, buffer_size, seed, workload="default"):
        if workload not in WORKLOADS + (SPLIT_BATCHES,):
            raise ValueError("unknown workload %r" % workload)
        self.path = str(path)
        self.kernel_name = kernel_name
        self.kernel = _kernel.load(kernel_name)
        self.buffer_size = buffer_size
        self.workload = workload
        self.rng = random.Random(seed)
        self.work = tempfile.mkdtemp(prefix="semidbm-crash-")
        self.model = {}
        self.rounds = 0
        self.next_seed = 1
        self.compaction_seconds = 0.005
        self.close_seconds = 0.005
        self.counts = collections.Counter()
        self.failures = []

    def run(self, kills):
        """Do ``kills`` rounds; stop at the first failure. Returns the failures.

        The database is made first (kills during its creation are
        tests/test_crash.py's).
        """
        db.open_with(self.kernel, self.path, "c",
                     format=2 if self.workload in ("batch", SPLIT_BATCHES) else None).close()
        for _ in range(kills):
            self.round()
            if self.failures:
                break
        return self.failures

    def round(self):
        """Start the writers, kill them, check the database, write after the recovery."""
        self.rounds += 1
        aim = self.rng.random() < 0.25
        count = SHARED_WRITERS if self.workload == "shared" else 1
        children = [self.start_writer(number, aim and number == 0) for number in range(count)]
        try:
            self.wait_and_kill([child for child, _ in children], aim)
        finally:
            for child, _ in children:
                child.kill()
                child.wait()
                child.stdout.close()
        logs = []
        for child, (log_path, stderr_path) in children:
            with open(stderr_path, "rb") as handle:
                errors = handle.read().decode(errors="replace")
            if child.returncode != -signal.SIGKILL:
                self.fail("the writer exited with %s before the kill: %s"
                          % (child.returncode, errors))
                return
            logs.append(self.read_log(log_path))
        if os.path.exists(os.path.join(self.path, COMPACT_NAME)):
            self.counts["compaction files left"] += 1
        if self.workload == "index" and not self.check_index_file():
            return
        self.check(logs)

    def start_writer(self, number, aim):
        """Start writer ``number`` (aimed at a compaction or the like if ``aim``).

        Returns the process and the paths of its log and its stderr.
        """
        log_path = os.path.join(self.work, "log%d" % number)
        stderr_path = os.path.join(self.work, "stderr%d" % number)
        if os.path.exists(log_path):
            os.remove(log_path)
        first_seed = self.next_seed
        self.next_seed += 1_000_000
        with open(stderr_path, "wb") as stderr:
            child = subprocess.Popen(
                [
                    sys.executable, os.path.abspath(__file__), "writer", self.path, log_path,
                    self.kernel_name, str(self.buffer_size), str(self.rng.getrandbits(32)),
                    str(first_seed), str(int(aim)), self.workload, str(number),
                ],
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        return child, (log_path, stderr_path)

    def read_log(self, log_path):
        """Read and count what a killed writer logged."""
        with open(log_path, "ab+") as handle:
            handle.seek(0)
            log = Log(handle.read().decode("ascii"))
        self.counts["kills"] += 1
        self.counts["kills during " + log.phase] += 1
        self.counts["operations logged"] += len(log.operations)
        if log.compaction_seconds:
            self.compaction_seconds = max(log.compaction_seconds)
        if log.close_seconds:
            self.close_seconds = max(log.close_seconds)
        return log

    def wait_and_kill(self, children, aim):
        """Kill the writers: the first at a random moment (during startup, anywhere, or in a
        compaction), each other one a random moment after the one before.

        So the writers left go on while the first lies dead, in its turn maybe.
        """
        first = children[0]
        roll = self.rng.random()
        if roll < 0.15:
            # Within the child's start (an interpreter takes longer than this
            # to start and import), so that these kills land in the open.
            time.sleep(self.rng.uniform(0, 0.05))
        elif all(child.stdout.readline() == b"ready\n" for child in children):
            line = first.stdout.readline() if aim else b""
            if line == b"compacting\n":
                time.sleep(self.rng.uniform(0, 1.5 * self.compaction_seconds))
            elif line == b"large batch\n":
                self.counts["kills aimed at a large batch"] += 1
                time.sleep(self.rng.uniform(0, LARGE_BATCH_SECONDS))
            elif line == b"closing\n":
                time.sleep(self.rng.uniform(0, 1.5 * self.close_seconds))
            else:
                time.sleep(self.rng.uniform(0, 0.12))
        first.send_signal(signal.SIGKILL)
        for child in children[1:]:
            time.sleep(self.rng.uniform(0, 0.05))
            child.send_signal(signal.SIGKILL)

    def check_index_file(self):
        """The ``index`` workload: what a kill leaves of the index file is valid, or absent.

        ``index`` is renamed into place only whole and after the data it
        covers was fsynced, and removed before a compaction's rename: so
        whatever the kill interrupted, an ``index`` present is valid for
        the data file now. Returns False after a failure.
        """
        names = os.listdir(self.path)
        if index_format.INDEX_TEMP_NAME in names:
            self.counts["index.new left"] += 1
        if index_format.INDEX_NAME not in names:
            self.counts["no index after the kill"] += 1
            return True
        self.counts["index after the kill"] += 1
        with open(os.path.join(self.path, index_format.INDEX_NAME), "rb") as handle:
            index_data = handle.read()
        with open(os.path.join(self.path, "data"), "rb") as handle:
            data = handle.read()
        problems = index_format.problems(index_data, data)
        if problems:
            self.fail("the index left by the kill is not valid: %s" % "; ".join(problems[:3]))
            return False
        return True

    def check(self, logs):
        """Check the database against the logs, then write after the recovery and check again."""
        try:
            recovered, caught = read_all(self.kernel, self.path)
        except Exception as exc:  # noqa: BLE001 - any failure to open is what we look for
            self.fail("the database does not open after the kill: %r" % exc)
            return
        if any(not issubclass(w.category, semidbm.TornTailWarning) for w in caught):
            self.fail("unexpected warnings: %s" % [str(w.message) for w in caught])
            return
        if caught:
            self.counts["torn tails"] += 1
            if any(long_tail(str(w.message), self.buffer_size) for w in caught):
                self.counts["torn tails longer than a buffer"] += 1
        if self.workload == "index" and not self.same_without_the_index(recovered):
            return
        for number, log in enumerate(logs):
            if not self.explains(log, self.owned(self.model, number),
                                 self.owned(recovered, number)):
                return
        self.model = recovered
        self.write_after_recovery()

    def owned(self, state, number):
        """The keys of ``state`` that writer ``number`` writes: all of them, but for ``shared``."""
        if self.workload != "shared":
            return state
        return {key: value for key, value in state.items()
                if int(key[1:]) // KEYSPACE == number}

    def explains(self, log, start, recovered):
        """True if ``recovered`` is ``start`` after a prefix of ``log`` that it may hold.

        At least every operation up to the last sync, or, unbuffered or
        shared (a shared writer writes each operation to the file before
        it returns), every operation that returned.
        """
        low = log.durable
        if self.buffer_size == 0 or self.workload == "shared":
            # Every operation (or batch) before the last logged one returned: it is in the file.
            low = max(low, log.last_started if log.phase in ("write", "batch")
                      else len(log.operations))
        prefixes = [
            p for p in matching_prefixes(start, log.operations, recovered, low)
            if p in log.boundaries
        ]
        if not prefixes:
            self.fail(describe_mismatch(start, log.operations, recovered, low))
            return False
        self.counts["operations lost (unsynced, as allowed)"] += len(log.operations) - prefixes[-1]
        return True

    def same_without_the_index(self, recovered):
        """The pure kernel, which never reads the index file, finds what the tested kernel did."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", semidbm.TornTailWarning)
                with db.open_with(_kernel.load("python"), self.path, "r") as database:
                    replayed = dict(database.items())
                with db.open_with(self.kernel, self.path, "r") as database:
                    if database.index_covered:
                        self.counts["opens that used the index"] += 1
        except Exception as exc:  # noqa: BLE001
            self.fail("the database does not open after the kill: %r" % exc)
            return False
        if replayed != recovered:
            self.fail("%d keys read with the index, %d replaying the log; they differ at %r" % (
                len(recovered), len(replayed),
                sorted(key for key in recovered.keys() | replayed.keys()
                       if recovered.get(key) != replayed.get(key))[:5]))
            return False
        return True

    def write_after_recovery(self):
        """Open for writing (cutting any torn tail), write, close; the next open must see it."""
        expected = dict(self.model)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", semidbm.TornTailWarning)
                database = db.open_with(self.kernel, self.path, "w", buffer_size=self.buffer_size)
                if self.workload == "index" and os.path.exists(
                    os.path.join(self.path, index_format.INDEX_TEMP_NAME)
                ):
                    database.close()
                    self.fail("the writer left the index.new of the killed one")
                    return
                with database:
                    for _ in range(3):
                        key = b"k%d" % self.rng.randrange(KEYSPACE)
                        value = value_of(self.next_seed, self.rng.randrange(50))
                        self.next_seed += 1
                        database[key] = expected[key] = value
                    key = b"k%d" % self.rng.randrange(KEYSPACE)
                    if key in database:
                        del database[key]
                        del expected[key]
            reopened, caught = read_all(self.kernel, self.path)
        except Exception as exc:  # noqa: BLE001
            self.fail("writing after the recovery failed: %r" % exc)
            return
        if caught or reopened != expected:
            self.fail("writes after the recovery did not survive the reopen (warnings %s)" % caught)
            return
        self.model = reopened

    def fail(self, message):
        self.failures.append("round %d (%s, buffer_size=%d): %s" % (
            self.rounds, self.kernel_name, self.buffer_size, message))

    def close(self):
        """Remove the harness's working files (the database stays where it is)."""
        for name in os.listdir(self.work):
            os.remove(os.path.join(self.work, name))
        os.rmdir(self.work)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=1000, help="kills per configuration")
    parser.add_argument("--kernel", choices=["cython", "python"], action="append")
    parser.add_argument("--buffer-size", type=int, action="append",
                        help="buffer sizes to run (default: 0 and the default buffer)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workload", choices=WORKLOADS, default="default",
                        help="index: kills aimed at the index file's writes (compiled kernel)")
    parser.add_argument("--keep", action="store_true", help="keep the database directories")
    options = parser.parse_args(argv)
    failed = False
    for kernel_name in options.kernel or ["cython", "python"]:
        for buffer_size in options.buffer_size or [0, DEFAULT_BUFFER_SIZE]:
            place = tempfile.mkdtemp(prefix="semidbm-crash-db-")
            started = time.perf_counter()
            with Harness(os.path.join(place, "db"), kernel_name, buffer_size, options.seed,
                         options.workload) as harness:
                failures = harness.run(options.kills)
            print("%s, buffer_size=%d: %d rounds in %.0f s" % (
                kernel_name, buffer_size, harness.rounds, time.perf_counter() - started))
            for name, count in sorted(harness.counts.items()):
                print("    %s: %d" % (name, count))
            for failure in failures:
                print("    FAILURE: " + failure)
                failed = True
            if options.keep or failures:
                print("    database kept in " + place)
            else:
                subprocess.run(["rm", "-rf", place], check=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["writer"]:
        path, log_path, kernel_name, buffer_size, seed, first_seed, aim, workload, number = (
            sys.argv[2:])
        writer(path, log_path, kernel_name, int(buffer_size), int(seed), int(first_seed),
               aim == "1", workload, int(number))
    else:
        sys.exit(main())
