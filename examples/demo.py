"""A short tour: create a database, write, reopen, read, and say which kernel ran.

Run with ``bash scripts/demo.sh`` (which sets up the environment first).
"""

import os
import tempfile
import time

import semidbm


def main():
    count = 100_000
    with tempfile.TemporaryDirectory() as place:
        path = os.path.join(place, "demo.db")

        started = time.perf_counter()
        with semidbm.open(path, "c") as db:
            for i in range(count):
                db[b"%016d" % i] = b"value %d" % i
            db["greeting"] = "héllo"
        written = time.perf_counter() - started

        started = time.perf_counter()
        with semidbm.open(path, "r") as db:
            assert len(db) == count + 1
            for i in range(count):
                assert db[b"%016d" % i] == b"value %d" % i
            greeting = db["greeting"].decode("utf-8")
        read = time.perf_counter() - started

        size = os.path.getsize(os.path.join(path, "data"))
    print("semidbm %s, implementation: %s" % (semidbm.__version__, semidbm.implementation))
    print("wrote %d keys in %.3f s (%.0f/s), file %d bytes" % (count, written, count / written, size))
    print("reopened and read them back in %.3f s (%.0f/s)" % (read, count / read))
    print("greeting: %s" % greeting)


if __name__ == "__main__":
    main()
