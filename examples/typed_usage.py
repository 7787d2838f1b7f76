"""The public API under a type checker: ``mypy --strict examples/typed_usage.py``.

semidbm ships type information (``py.typed``, annotated sources and a
stub for the compiled kernel), so code like this is checked against the
real signatures. ``scripts/check_packaging.py`` runs mypy on it against
the installed wheel, and runs it.
"""

import dbm.dumb
import json
import os
import shelve
import sys
import tempfile
from pathlib import Path
from typing import Optional

import semidbm
import semidbm.db
import semidbm.migrate
import semidbm.shelf


def count_words(path: Path, words: list[str]) -> dict[bytes, int]:
    """Count ``words`` in the database at ``path``; return every count stored there."""
    with semidbm.open(path, "c", buffer_size=64 * 1024) as db:
        for word in words:
            current = db.get(word, b"0")
            db[word] = str(int(current) + 1)
        db.sync()
        return {key: int(value) for key, value in db.items()}


def read_back(path: Path) -> list[bytes]:
    """The keys of the database at ``path``, opened read-only with checksums on."""
    try:
        db = semidbm.open(path, verify_checksums=True)
    except semidbm.DBMLoadError as exc:
        print("not a readable semidbm file:", exc, file=sys.stderr)
        return []
    except semidbm.error as exc:
        print("cannot open:", exc.errno, file=sys.stderr)
        return []
    try:
        keys: list[bytes] = db.keys()
        assert all(db[key] == db[bytearray(key)] for key in keys)
        return sorted(keys)
    finally:
        db.close()


def newest(db: semidbm.Database, keys: list[str]) -> Optional[bytes]:
    """The value of the first of ``keys`` that ``db`` holds: ``semidbm.Database`` as a type hint."""
    assert isinstance(db, semidbm.Database)
    for key in keys:
        if key in db:
            return db[key]
    return None


def log_size(path: Path) -> tuple[int, int]:
    """The number of keys and the data file's size, through ``semidbm.db`` (for tools).

    ``semidbm.db.open`` is ``semidbm.open``, typed the same; ``data_file``
    finds a database's data file, checking that it is one.
    """
    with semidbm.db.open(path) as db:
        keys = len(db)
    return keys, os.path.getsize(semidbm.db.data_file(path))


def store_objects(path: Path) -> int:
    """Use a semidbm database as a ``shelve`` backend."""
    shelf: shelve.Shelf[dict[str, int]] = shelve.Shelf(semidbm.open(path, "n"))
    try:
        shelf["config"] = {"retries": 3}
        return shelf["config"]["retries"]
    finally:
        shelf.close()


def safe_settings(path: Path) -> list[bytes]:
    """A JSON shelf (safe to read from anyone), then a walk over its keys as dbm.gnu does it."""
    with semidbm.open_shelf(path, "n", serializer="json") as shelf:
        shelf["colours"] = ["red", "green"]
        assert shelf["colours"] == ["red", "green"]
    steps: list[tuple[int, int]] = []
    walked: list[bytes] = []
    with semidbm.open(path, "w") as db:
        key = db.firstkey()
        while key is not None:
            walked.append(key)
            key = db.nextkey(key)
        db.compact(progress=lambda done, total: steps.append((done, total)))
    assert steps and steps[-1][0] == steps[-1][1], steps
    return walked


def typed_shelf(path: Path) -> int:
    """``semidbm.shelf.Shelf`` over a database opened apart, its values typed, stored as JSON."""
    primes: semidbm.shelf.Shelf[list[int]] = semidbm.shelf.Shelf(
        semidbm.open(path, "n"), writeback=True, serializer="json"
    )
    with primes:
        primes["small"] = [2, 3, 5]
        primes["small"].append(7)
        return sum(primes["small"])


def own_serializer(path: Path) -> object:
    """Any object with ``dumps`` and ``loads`` serializes, the ``json`` module included."""
    with semidbm.open_shelf(path, "n", serializer=json) as shelf:
        shelf["k"] = {"a": [1]}
        return shelf["k"]


def migrate(place: Path) -> tuple[str, int, int]:
    """Copy a ``dbm.dumb`` database into semidbm, then dump the copy as text."""
    with dbm.dumb.open(str(place / "old"), "c") as old:
        old[b"key"] = b"value"
    kind, count = semidbm.migrate.convert(place / "old", place / "new.db", buffer_size=0)
    with semidbm.open(place / "new.db") as db, open(place / "dump.txt", "wb") as dump:
        exported = semidbm.migrate.export_dump(db, dump)
    return kind, count, exported


def main() -> None:
    with tempfile.TemporaryDirectory() as place:
        words = Path(place) / "words.db"
        counts = count_words(words, ["to", "be", "or", "not", "to", "be"])
        assert counts == {b"to": 2, b"be": 2, b"or": 1, b"not": 1}, counts
        assert read_back(words) == [b"be", b"not", b"or", b"to"]
        assert read_back(Path(place) / "missing.db") == []
        with semidbm.open(words) as db:
            assert newest(db, ["maybe", "be"]) == b"2"
        keys, size = log_size(words)
        assert keys == 4 and size > 0, (keys, size)
        assert store_objects(Path(place) / "objects.db") == 3
        assert safe_settings(Path(place) / "settings.db") == [b"colours"]
        assert typed_shelf(Path(place) / "primes.db") == 17
        assert own_serializer(Path(place) / "own.db") == {"a": [1]}
        assert migrate(Path(place)) == ("dbm.dumb", 1, 1)
        with semidbm.open(words, "wsf") as db:  # dbm.gnu's letters, any of them, in any order
            db["synced"] = "1"
        with semidbm.open(words, "w") as db:
            del db[memoryview(b"or")]
            removed = db.pop("not", None)
            db.compact()
            print("semidbm %s (%s): %d keys, removed %r"
                  % (semidbm.__version__, semidbm.implementation, len(db), removed))


if __name__ == "__main__":
    main()
