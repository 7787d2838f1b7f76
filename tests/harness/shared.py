"""The shared writers' model test: 4 writer processes and 2 readers, checked against a dict.

Each writer opens the database with the flag ``'cm'`` (they race to
create it) and, until a common deadline, does random operations of two
kinds, logging each with what it returned or raised:

- *Turns* on the shared keys ``s0`` ... : a ``Database.locked()`` block
  or a batch, holding one turn of the write lock. The turn first reads
  the counter key ``#seq`` and, as its last write, stores it plus one:
  since a turn is exclusive and begins by catching up with every other
  writer, the counter numbers the turns in lock order, 1, 2, 3 ... with
  no gap and no number twice (a number twice is two turns that overlapped,
  a gap a turn whose writes were lost). Inside, puts, deletes of present
  and missing keys, ``update``, ``delete_many``, ``pop``, ``setdefault``,
  reads, a read-modify-write, and now and then a nested ``sync()`` or
  ``compact()``.
- *Single operations* on the writer's private keys ``p<writer>.*``, each
  its own turn: the same operations outside any block, and reads of its
  own writes, ``sync()``, ``compact()`` and ``refresh()``. Only that
  writer changes its private keys, so its program order is their order.

The checker replays the turns in counter order and each writer's single
operations in its order against dict models, checks every answer (a
KeyError or not, every value read), and requires the final database,
opened read-only with each kernel, to equal the models.

Each reader loops: note the time, ``refresh()``, snapshot ``items()``.
Every value names the write that stored it. The checker requires of
every snapshot that

- its shared keys hold the state after the turns up to the counter it
  shows, plus a prefix of the next turn's writes in their order (a
  batch: none or all of them);
- each writer's private keys hold the state after some prefix of that
  writer's single operations;
- neither the counter nor any writer's prefix goes back from one
  snapshot to the next;
- every turn and single operation that had returned before the refresh
  began is in it (the clock is the system's monotonic one, which every
  process shares).

So a reader never sees a value nobody wrote, a deleted key come back, a
state older than one it saw, half a batch, or miss a write that had
returned. Run ``python -m tests.harness.shared --help`` from the
repository root for long runs; tests/test_shared_model.py runs short ones.
"""

import argparse
import bisect
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):  # run as a script: a writer or a reader
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import semidbm
from semidbm import _kernel, db
from semidbm.format import DEFAULT_BUFFER_SIZE

#: The counter that numbers the turns in lock order.
SEQ = "#seq"
#: The shared keys (changed only in turns) and each writer's private keys.
SHARED = [b"s%d" % k for k in range(16)]
PRIVATE_KEYS = 10
WRITERS = 4
READERS = 2
#: The write buffers writers draw from: none, a small one (a turn's records then
#: reach the file in pieces), and the default.
BUFFER_SIZES = (0, 256, DEFAULT_BUFFER_SIZE)
#: How long a reader keeps trying to open the database the writers are creating.
OPEN_SECONDS = 20.0


def as_text(data):
    """Bytes as the text the logs hold (every key and value here is ASCII)."""
    return data.decode("ascii")


class Values:
    """The values one writer stores: each names the writer and the write, so is unique."""

    def __init__(self, writer, rng):
        self.writer = writer
        self.rng = rng
        self.count = 0

    def next(self):
        """A new value: ``<writer>.<n>:`` and padding of a random length (a few are long)."""
        self.count += 1
        size = self.rng.choice((0, 3, 20, 100, 700))
        return b"%d.%d:" % (self.writer, self.count) + b"v" * size


# --- the writer ---


def writer(path, log_path, kernel_name, number, seed, deadline):
    """Do random turns and single operations until ``deadline`` (monotonic), logging each."""
    rng = random.Random(seed)
    values = Values(number, rng)
    database = db.open_with(_kernel.load(kernel_name), path, "cm", format=2,
                            buffer_size=rng.choice(BUFFER_SIZES))
    private = [b"p%d.%d" % (number, k) for k in range(PRIVATE_KEYS)]
    with open(log_path, "w") as log, database:
        while time.monotonic() < deadline:
            roll = rng.random()
            if roll < 0.35:
                entry = locked_turn(database, rng, values)
            elif roll < 0.5:
                entry = batch_turn(database, rng, values)
            else:
                entry = single_operation(database, rng, values, private)
            entry["t"] = time.monotonic()
            log.write(json.dumps(entry) + "\n")


def attempt(function, *args):
    """Call ``function``; its result as logged, or ``"KeyError"`` if it raised KeyError."""
    try:
        result = function(*args)
    except KeyError:
        return "KeyError"
    return as_text(result) if isinstance(result, bytes) else result


def random_operation(database, rng, values, keys):
    """Do one random operation on ``keys``; return its log entry ``[name, arguments, answer]``."""
    roll = rng.random()
    key = rng.choice(keys)
    if roll < 0.3:
        value = values.next()
        database[key] = value
        return ["put", [as_text(key), as_text(value)], None]
    if roll < 0.5:
        return ["delete", [as_text(key)], attempt(database.__delitem__, key)]
    if roll < 0.6:
        pairs = [(rng.choice(keys), values.next()) for _ in range(rng.randint(1, 4))]
        database.update(pairs)
        return ["update", [[as_text(k), as_text(v)] for k, v in pairs], None]
    if roll < 0.7:
        chosen = [rng.choice(keys) for _ in range(rng.randint(1, 3))]
        return ["delete_many", [as_text(k) for k in chosen], attempt(database.delete_many, chosen)]
    if roll < 0.8:
        return ["pop", [as_text(key)], attempt(database.pop, key, None)]
    if roll < 0.9:
        value = values.next()
        return ["setdefault", [as_text(key), as_text(value)],
                attempt(database.setdefault, key, value)]
    return ["get", [as_text(key)], attempt(database.get, key)]


def locked_turn(database, rng, values):
    """A ``locked()`` block: number the turn, do a few operations and a read-modify-write."""
    with database.locked():
        seq = int(database.get(SEQ, b"0")) + 1
        operations = [random_operation(database, rng, values, SHARED)
                      for _ in range(rng.randint(0, 3))]
        key = rng.choice(SHARED)
        read = database.get(key)
        written = values.next() + b"+" + (read or b"-")[:12]
        database[key] = written
        operations.append(["modify", [as_text(key), as_text(written)],
                           None if read is None else as_text(read)])
        roll = rng.random()
        if roll < 0.02:
            database.compact()
        elif roll < 0.05:
            database.sync()
        database[SEQ] = b"%d" % seq
    return {"seq": seq, "kind": "locked", "operations": operations}


def batch_turn(database, rng, values):
    """A batch: number it, read, set and delete shared keys; it commits whole at the end."""
    operations = []
    with database.batch() as batch:
        seq = int(database.get(SEQ, b"0")) + 1
        for _ in range(rng.randint(1, 5)):
            key = rng.choice(SHARED)
            roll = rng.random()
            if roll < 0.5:
                value = values.next()
                batch[key] = value
                operations.append(["put", [as_text(key), as_text(value)], None])
            elif roll < 0.8:
                operations.append(["delete", [as_text(key)], attempt(batch.__delitem__, key)])
            else:
                operations.append(["get", [as_text(key)], attempt(database.get, key)])
        batch[SEQ] = b"%d" % seq
    return {"seq": seq, "kind": "batch", "operations": operations}


def single_operation(database, rng, values, private):
    """One operation in its own turn, on the private keys; or sync, compact, refresh."""
    roll = rng.random()
    if roll < 0.02:
        database.compact()
        return {"operation": ["compact", [], None]}
    if roll < 0.05:
        database.sync()
        return {"operation": ["sync", [], None]}
    if roll < 0.1:
        database.refresh()
        return {"operation": ["refresh", [], None]}
    return {"operation": random_operation(database, rng, values, private)}


# --- the reader ---


def reader(path, log_path, kernel_name, seed, deadline):
    """Refresh and snapshot until ``deadline``, logging each with when its refresh began."""
    rng = random.Random(seed)
    database = open_reader(_kernel.load(kernel_name), path)
    with open(log_path, "w") as log, database:
        while time.monotonic() < deadline:
            began = time.monotonic()
            database.refresh()
            items = {as_text(k): as_text(v) for k, v in database.items()}
            log.write(json.dumps({"t": began, "items": items}) + "\n")
            time.sleep(rng.uniform(0, 0.004))


def open_reader(kernel, path):
    """Open the database read-only once a writer has created it."""
    give_up = time.monotonic() + OPEN_SECONDS
    while True:
        try:
            return db.open_with(kernel, path, "r")
        except semidbm.error:
            if time.monotonic() > give_up:
                raise
            time.sleep(0.01)


# --- the checker ---


class Failure(Exception):
    """What the checker found wrong."""


def apply(state, operation, base=None):
    """Apply one logged operation to ``state`` (a dict) and check its answer.

    Returns the writes it made, in order: ``(key, value or None)``.
    ``base``: in a batch, the state before the batch, which its reads
    see (``state`` then holds the batch's pending changes, None for a
    delete). Raises Failure if the answer differs from the model's.
    """
    name, arguments, answer = operation
    if base is not None:
        return apply_in_batch(state, base, name, arguments, answer)
    expected, writes = None, []
    if name in ("put", "modify"):
        key, value = arguments
        expected = None if name == "put" else state.get(key)
        writes = [(key, value)]
    elif name == "delete":
        expected = None if arguments[0] in state else "KeyError"
        writes = [(arguments[0], None)] if expected is None else []
    elif name == "update":
        writes = [tuple(pair) for pair in arguments]
    elif name == "delete_many":
        present = all(k in state for k in arguments) and len(set(arguments)) == len(arguments)
        expected = None if present else "KeyError"
        writes = [(k, None) for k in arguments] if present else []
    elif name == "pop":
        expected = state.get(arguments[0])
        writes = [(arguments[0], None)] if expected is not None else []
    elif name == "setdefault":
        key, value = arguments
        expected = state.get(key, value)
        writes = [] if key in state else [(key, value)]
    elif name == "get":
        expected = state.get(arguments[0])
    if answer != expected:
        raise Failure("%s %s answered %r; the model says %r" % (name, arguments, answer, expected))
    for key, value in writes:
        set_or_delete(state, key, value)
    return writes


def apply_in_batch(pending, base, name, arguments, answer):
    """``apply`` for an operation of a batch: it changes ``pending``, reads see ``base``."""
    key = arguments[0]
    expected = None
    if name == "put":
        pending[key] = arguments[1]
    elif name == "delete":
        present = pending[key] is not None if key in pending else key in base
        expected = None if present else "KeyError"
        if present:
            pending[key] = None
    elif name == "get":
        expected = base.get(key)
    if answer != expected:
        raise Failure("batch %s %s answered %r; the model says %r"
                      % (name, arguments, answer, expected))
    return []


def set_or_delete(state, key, value):
    """Set ``key`` in the model ``state``, or delete it if ``value`` is None."""
    if value is None:
        state.pop(key, None)
    else:
        state[key] = value


class Turns:
    """The turns of every writer replayed in lock order: each state, and each turn's writes."""

    def __init__(self, entries):
        entries = sorted(entries, key=lambda entry: entry["seq"])
        numbers = [entry["seq"] for entry in entries]
        if numbers != list(range(1, len(numbers) + 1)):
            duplicated = sorted(n for n, c in collections.Counter(numbers).items() if c > 1)
            raise Failure("the turns are not numbered 1..%d: %s" % (
                len(numbers), "taken twice: %s" % duplicated[:5] if duplicated else "a gap"))
        state = {}
        #: ``states[s]``: the shared keys after turn s; ``writes[s]``: turn s's writes, in order.
        self.states, self.writes, self.atomic, self.returned = [{}], [[]], [True], [float("-inf")]
        for entry in entries:
            try:
                writes = self.replay(state, entry)
            except Failure as exc:
                raise Failure("turn %d (%s): %s" % (entry["seq"], entry["kind"], exc)) from None
            state[SEQ] = str(entry["seq"])
            self.states.append(dict(state))
            self.writes.append(writes + [(SEQ, state[SEQ])])
            self.atomic.append(entry["kind"] == "batch")
            self.returned.append(entry["t"])

    @staticmethod
    def replay(state, entry):
        """Apply one turn's operations to ``state``; return its writes in the order made."""
        if entry["kind"] == "locked":
            return [w for operation in entry["operations"] for w in apply(state, operation)]
        pending = {}
        for operation in entry["operations"]:
            apply(pending, operation, base=dict(state))
        for key, value in pending.items():
            set_or_delete(state, key, value)
        return list(pending.items())

    @property
    def final(self):
        """The shared keys after the last turn."""
        return self.states[-1]

    def seen(self, shared, floor):
        """The turn number of a reader's ``shared`` keys, at least ``floor``; Failure if none fits.

        ``shared`` holds the counter ``s``: it must be the state after
        turn ``s`` plus a prefix of turn ``s + 1``'s writes (none or all
        of a batch's).
        """
        number = int(shared.get(SEQ, "0"))
        if number < floor:
            raise Failure("the reader saw turn %d, after turn %d had been seen or returned"
                          % (number, floor))
        state = dict(self.states[number])
        if state == shared:
            return number
        following = number + 1
        if following < len(self.writes) and not self.atomic[following]:
            for key, value in self.writes[following]:
                set_or_delete(state, key, value)
                if state == shared:
                    return number
        raise Failure("the reader's shared keys are no state of turn %d: %s" % (
            number, differences(self.states[number], shared)))


def differences(expected, found):
    """A short account of where ``found`` differs from ``expected``."""
    keys = sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))
    return "; ".join("%s: %r, expected %r" % (k, found.get(k), expected.get(k)) for k in keys[:4])


class Singles:
    """One writer's single operations replayed in its order: the states after each write.

    A reader may see an operation half done (``update`` appends its
    records one by one), so the states counted are those after each
    write of each operation, numbered 0, 1, 2 ... in order.
    """

    def __init__(self, number, entries):
        self.number = number
        state = {}
        #: Each state (its items, frozen) -> the numbers of the writes that end in it.
        self.states = collections.defaultdict(list)
        self.states[frozenset()].append(0)
        #: The time each operation returned, and the number of its last write.
        self.returned, self.ends = [], [0]
        written = 0
        for position, entry in enumerate(entries, 1):
            try:
                writes = apply(dict(state), entry["operation"])
            except Failure as exc:
                raise Failure("writer %d, single operation %d: %s"
                              % (number, position, exc)) from None
            for key, value in writes:
                set_or_delete(state, key, value)
                written += 1
                self.states[frozenset(state.items())].append(written)
            self.returned.append(entry["t"])
            self.ends.append(written)
        self.final = state

    def seen(self, private, floor, moment):
        """The first write at least ``floor`` whose state is ``private``; Failure if none.

        Every operation that returned before ``moment`` must be in it.
        """
        floor = max(floor, self.ends[bisect.bisect_left(self.returned, moment)])
        for position in self.states.get(frozenset(private.items()), ()):
            if position >= floor:
                return position
        raise Failure("the reader's keys of writer %d are the state after none of its "
                      "writes from the %dth on" % (self.number, floor))


class LastReturned:
    """The last turn (the highest number) that had returned at a given moment."""

    def __init__(self, returned):
        order = sorted(range(len(returned)), key=returned.__getitem__)
        self.times = [returned[number] for number in order]
        self.highest = []
        for number in order:
            self.highest.append(max(number, self.highest[-1] if self.highest else 0))

    def before(self, moment):
        """The highest turn number that returned before ``moment`` (0: none)."""
        position = bisect.bisect_left(self.times, moment)
        return self.highest[position - 1] if position else 0


def check_reader(snapshots, turns, singles):
    """Check one reader's snapshots in order (see the module docstring); Failure if one is wrong."""
    turn_floor = 0
    floors = {number: 0 for number in singles}
    last_returned = LastReturned(turns.returned)
    for position, snapshot in enumerate(snapshots):
        items, began = snapshot["items"], snapshot["t"]
        try:
            turn_floor = turns.seen(
                {k: v for k, v in items.items() if not k.startswith("p")},
                max(turn_floor, last_returned.before(began)),
            )
            for number, replayed in singles.items():
                prefix = "p%d." % number
                floors[number] = replayed.seen(
                    {k: v for k, v in items.items() if k.startswith(prefix)}, floors[number], began
                )
        except Failure as exc:
            raise Failure("snapshot %d: %s" % (position, exc)) from None


def read_log(log_path):
    """The entries of a writer's or a reader's log, in the order written."""
    with open(log_path) as handle:
        return [json.loads(line) for line in handle]


def check(path, writer_logs, reader_logs, kernel_names):
    """Check the logs and the final database; return counts, or raise Failure."""
    entries = [read_log(p) for p in writer_logs]
    turns = Turns([e for log in entries for e in log if "seq" in e])
    singles = {n: Singles(n, [e for e in log if "operation" in e]) for n, log in enumerate(entries)}
    expected = dict(turns.final)
    for replayed in singles.values():
        expected.update(replayed.final)
    for name in sorted(set(kernel_names)):
        with db.open_with(_kernel.load(name), path, "r") as database:
            found = {as_text(k): as_text(v) for k, v in database.items()}
        if found != expected:
            raise Failure("the final database, read with the %s kernel, is not the model's: %s"
                          % (name, differences(expected, found)))
    counts = collections.Counter(turns=len(turns.states) - 1)
    for log in entries:
        for entry in log:
            for operation in entry.get("operations", [entry.get("operation")]):
                counts[operation[0] + ("" if operation[2] != "KeyError" else " (KeyError)")] += 1
    for number, reader_log in enumerate(reader_logs):
        snapshots = read_log(reader_log)
        try:
            check_reader(snapshots, turns, singles)
        except Failure as exc:
            raise Failure("reader %d, %s" % (number, exc)) from None
        counts["snapshots"] += len(snapshots)
    return counts


# --- the run ---


def run(path, kernel_names, seconds, seed):
    """Run ``WRITERS`` writers and ``READERS`` readers on ``path`` for ``seconds``; check them.

    ``kernel_names``: the kernel of each process, writers first (a
    list of ``WRITERS + READERS`` names). Returns the counts of what was
    done; raises Failure with what went wrong.
    """
    work = tempfile.mkdtemp(prefix="semidbm-shared-")
    try:
        rng = random.Random(seed)
        deadline = time.monotonic() + 1.0 + seconds  # the interpreters start meanwhile
        logs = [os.path.join(work, "log%d" % n) for n in range(WRITERS + READERS)]
        children = []
        for number, (kernel_name, log_path) in enumerate(zip(kernel_names, logs)):
            role = ["writer", str(number)] if number < WRITERS else ["reader"]
            children.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__)] + role + [
                    str(path), log_path, kernel_name, str(rng.getrandbits(32)), repr(deadline)],
                stderr=subprocess.PIPE,
            ))
        errors = [child.communicate(timeout=seconds + 120)[1] for child in children]
        for number, (child, error) in enumerate(zip(children, errors)):
            if child.returncode != 0:
                raise Failure("process %d exited with %s: %s"
                              % (number, child.returncode, error.decode(errors="replace")))
        return check(path, logs[:WRITERS], logs[WRITERS:], kernel_names)
    finally:
        subprocess.run(["rm", "-rf", work], check=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="each run's length")
    parser.add_argument("--runs", type=int, default=5, help="runs per choice of kernels")
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args(argv)
    failed = False
    for kernels in (["cython"] * 6, ["python"] * 6, ["cython", "python"] * 3):
        for run_number in range(options.runs):
            place = tempfile.mkdtemp(prefix="semidbm-shared-db-")
            try:
                counts = run(os.path.join(place, "db"), kernels, options.seconds,
                             options.seed + run_number)
            except Failure as exc:
                print("%s, run %d: FAILURE: %s (database kept in %s)"
                      % ("/".join(kernels), run_number, exc, place))
                failed = True
                continue
            print("%s, run %d: %s" % ("/".join(kernels), run_number, dict(sorted(counts.items()))))
            subprocess.run(["rm", "-rf", place], check=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["writer"]:
        number, path, log_path, kernel_name, seed, deadline = sys.argv[2:]
        writer(path, log_path, kernel_name, int(number), int(seed), float(deadline))
    elif sys.argv[1:2] == ["reader"]:
        path, log_path, kernel_name, seed, deadline = sys.argv[2:]
        reader(path, log_path, kernel_name, int(seed), float(deadline))
    else:
        sys.exit(main())
