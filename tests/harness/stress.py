"""Stress: one writer process with reader threads, several reader processes, for a while.

- The writer's main thread sets, updates and deletes keys, syncs and
  compacts; its other threads read the same database object, and one
  syncs it now and then. Each value names its key and a version drawn
  from one rising counter, so a reader can tell a real value from
  anything else and a newer one from an older one.
- Reader processes open the database read-only and loop: refresh, read
  random keys, sometimes every key; another thread of theirs reads
  while they refresh.

Every read is checked: the value is the one written with that version
for that key, and no reader ever sees a key go back to an older version.
At the end the writer saves its model; the readers refresh once more and
must hold exactly the model, and so must the database opened afresh.

``python -m tests.harness.stress --seconds N`` for long runs;
tests/test_stress.py runs it briefly.
"""

import argparse
import collections
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

if __package__ in (None, ""):  # run as a script: a child process
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from semidbm import _kernel, db

KEYSPACE = 2000


def value_of(key, version):
    """The value written to ``key`` at ``version``."""
    return b"%s|%d|" % (key, version) + b"x" * (version * 7919 % 300)


class Checker:
    """Checks values read for one reader: well formed, never older than before."""

    def __init__(self):
        self.seen = {}
        self.errors = []
        self.reads = 0

    def check(self, key, value):
        self.reads += 1
        try:
            name, version, _ = value.split(b"|", 2)
            version = int(version)
        except ValueError:
            self.errors.append("malformed value for %r: %r" % (key, value[:60]))
            return
        if name != key or value != value_of(key, version):
            self.errors.append("value for %r was never written to it: %r" % (key, value[:60]))
        elif version < self.seen.get(key, -1):
            self.errors.append(
                "%r went back from version %d to %d" % (key, self.seen[key], version)
            )
        else:
            self.seen[key] = version

    def read(self, database, key):
        """Read ``key``; a missing key is fine (deleted, or not written yet)."""
        try:
            value = database[key]
        except KeyError:
            return
        self.check(key, value)


#: The kinds of writes the writer makes, each counted, and the share of a roll of its dice
#: (from 0 to 1) up to which it makes each: 70% sets, 25% deletes, 4.9% syncs, the rest
#: compactions.
WRITE_SHARES = (("sets", 0.70), ("deletes", 0.95), ("syncs", 0.999), ("compactions", 1.0))
WRITES = tuple(kind for kind, _ in WRITE_SHARES)


def kind_of(roll):
    """The kind of write a roll of the writer's dice, from 0 to 1, makes (``WRITE_SHARES``)."""
    return next(kind for kind, bound in WRITE_SHARES if roll < bound)


def writer(path, kernel_name, seconds, seed, result_path):
    """The writer process: writes for ``seconds`` while its threads read; saves the model."""
    rng = random.Random(seed)
    database = db.open_with(_kernel.load(kernel_name), path, "w", buffer_size=4096)
    stop = threading.Event()
    counts = collections.Counter()
    checkers = []
    failures = []

    def read_loop(number):
        checker = Checker()
        checkers.append(checker)
        local = random.Random(seed + number)
        try:
            while not stop.is_set():
                checker.read(database, b"k%d" % local.randrange(KEYSPACE))
                if local.random() < 0.01:
                    time.sleep(0.0005)  # leave the writer time to write
                if local.random() < 0.001:
                    try:
                        for key in database:
                            checker.read(database, key)
                    except RuntimeError:
                        counts["iterations cut short by a change"] += 1
                    counts["iterations"] += 1
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            failures.append("reader thread: %r" % exc)

    def sync_loop():
        try:
            while not stop.wait(0.01):
                database.sync()
                counts["syncs from another thread"] += 1
        except Exception as exc:  # noqa: BLE001
            failures.append("sync thread: %r" % exc)

    threads = [threading.Thread(target=read_loop, args=(n,)) for n in range(2)]
    threads.append(threading.Thread(target=sync_loop))
    for thread in threads:
        thread.start()
    model = {}
    version = 0
    deadline = time.monotonic() + seconds
    # On a loaded machine (its fsyncs slow: a second each when other jobs fill the disk and
    # the processors) the writer may make too few writes in that time for the rarest of them,
    # a compaction (one in a thousand): past the deadline it makes each kind it has not made
    # yet, one write each, the readers still reading.
    try:
        while True:
            missing = [kind for kind in WRITES if not counts[kind]]
            past = time.monotonic() >= deadline
            if past and not missing:
                break
            kind = missing[0] if past else kind_of(rng.random())
            key = b"k%d" % rng.randrange(KEYSPACE)
            if kind == "sets":
                version += 1
                database[key] = value_of(key, version)
                model[key] = version
            elif kind == "deletes":
                if key in model:
                    del database[key]
                    del model[key]
            elif kind == "syncs":
                database.sync()
            else:
                database.compact()
            counts[kind] += 1
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        database.close()
    counts["reads in writer threads"] = sum(checker.reads for checker in checkers)
    errors = failures + [error for checker in checkers for error in checker.errors]
    with open(result_path, "w") as handle:
        json.dump({"counts": counts, "errors": errors[:20],
                   "model": {key.decode(): value for key, value in model.items()}}, handle)


def reader(path, kernel_name, seed, done_path, model_path, result_path):
    """A reader process: refresh and read until the writer is done, then compare with its model."""
    rng = random.Random(seed)
    checker = Checker()
    counts = collections.Counter()
    errors = []
    database = db.open_with(_kernel.load(kernel_name), path, "r")
    stop = threading.Event()
    thread_checker = Checker()

    def read_loop():
        # Reads from another thread while the main thread refreshes.
        local = random.Random(seed + 1)
        try:
            while not stop.is_set():
                thread_checker.read(database, b"k%d" % local.randrange(KEYSPACE))
                if local.random() < 0.01:
                    time.sleep(0.0005)
        except Exception as exc:  # noqa: BLE001
            errors.append("reader thread: %r" % exc)

    thread = threading.Thread(target=read_loop)
    thread.start()
    try:
        while not os.path.exists(done_path):
            database.refresh()
            counts["refreshes"] += 1
            for _ in range(200):
                checker.read(database, b"k%d" % rng.randrange(KEYSPACE))
            if rng.random() < 0.05:
                for key in database.keys():
                    checker.check(key, database[key])  # the reader's own index: never missing
                counts["full scans"] += 1
        database.refresh()
        with open(model_path) as handle:
            model = json.load(handle)["model"]
        expected = {key.encode(): value_of(key.encode(), version) for key, version in model.items()}
        if dict(database.items()) != expected:
            errors.append("after the last refresh the reader differs from the writer's model")
    except Exception as exc:  # noqa: BLE001
        errors.append("reader: %r" % exc)
    finally:
        stop.set()
        thread.join()
        database.close()
    counts["reads"] = checker.reads
    counts["reads in reader threads"] = thread_checker.reads
    all_errors = errors + checker.errors + thread_checker.errors
    with open(result_path, "w") as handle:
        json.dump({"counts": counts, "errors": all_errors[:20]}, handle)


def run(path, kernel_name, seconds, readers=2, seed=1):
    """Run the writer and ``readers`` reader processes; return (counts, errors)."""
    path = str(path)
    kernel = _kernel.load(kernel_name)
    db.open_with(kernel, path, "c").close()
    work = tempfile.mkdtemp(prefix="semidbm-stress-")
    done_path = os.path.join(work, "done")
    model_path = os.path.join(work, "writer.json")
    script = os.path.abspath(__file__)
    readers_started = [
        subprocess.Popen([sys.executable, script, "reader", path, kernel_name, str(seed + 10 + n),
                          done_path, model_path, os.path.join(work, "reader%d.json" % n)])
        for n in range(readers)
    ]
    errors = []
    try:
        code = subprocess.call([sys.executable, script, "writer", path, kernel_name, str(seconds),
                                str(seed), model_path], timeout=seconds + 300)
        if code != 0:
            errors.append("the writer exited with %d" % code)
    finally:
        with open(done_path, "w"):
            pass
        for process in readers_started:
            if process.wait(timeout=300) != 0:
                errors.append("a reader exited with %d" % process.returncode)
    counts = collections.Counter()
    results = [model_path] + [os.path.join(work, "reader%d.json" % n) for n in range(readers)]
    model = {}
    for result in results:
        if not os.path.exists(result):
            continue
        with open(result) as handle:
            data = json.load(handle)
        counts.update(data["counts"])
        errors.extend(data["errors"])
        model = data.get("model", model)
        os.remove(result)
    os.remove(done_path)
    os.rmdir(work)
    with db.open_with(kernel, path, "r", verify_checksums=True) as database:
        final = dict(database.items())
    if final != {key.encode(): value_of(key.encode(), version) for key, version in model.items()}:
        errors.append("the database opened afresh differs from the writer's model")
    counts["keys at the end"] = len(final)
    return counts, errors


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--kernel", choices=["cython", "python"], action="append")
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args(argv)
    failed = False
    for kernel_name in options.kernel or ["cython", "python"]:
        place = tempfile.mkdtemp(prefix="semidbm-stress-db-")
        counts, errors = run(os.path.join(place, "db"), kernel_name, options.seconds,
                             options.readers, options.seed)
        operations = sum(counts[name] for name in counts if name != "keys at the end")
        print("%s: %d operations in %.0f s" % (kernel_name, operations, options.seconds))
        for name, count in sorted(counts.items()):
            print("    %s: %d" % (name, count))
        for error in errors:
            print("    ERROR: " + error)
            failed = True
        subprocess.run(["rm", "-rf", place], check=True)
    return 1 if failed else 0


if __name__ == "__main__":
    role = sys.argv[1:2]
    if role == ["writer"]:
        path, kernel_name, seconds, seed, result_path = sys.argv[2:]
        writer(path, kernel_name, float(seconds), int(seed), result_path)
    elif role == ["reader"]:
        path, kernel_name, seed, done_path, model_path, result_path = sys.argv[2:]
        reader(path, kernel_name, int(seed), done_path, model_path, result_path)
    else:
        sys.exit(main())
