"""Migration: converting stdlib dbm databases, and the text dump (export and import)."""

import dbm
import dbm.dumb
import glob
import io
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import tempfile
import threading

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import semidbm
from semidbm import migrate

from .support.migration import (
    INTO_THE_DATABASE,
    SQLITEDICT_TABLE,
    files_of,
    make_sqlite,
    output_into_database,
)

SOURCE_DIRECTORY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")

#: Records that are awkward for a text format and for a dbm.
AWKWARD = {
    b"plain": b"text value",
    b"": b"empty key",
    b"empty value": b"",
    b"spaces and\nnewlines\r\n": b"tab\there # % 100%",
    bytes(range(256)): bytes(range(255, -1, -1)),
    "\u00e9t\u00e9 \U0001f40d".encode("utf-8"): b"\x00" * 17,
    b"large": os.urandom(3 * 1024 * 1024 + 5),
}


# --- dump fields ---


@given(st.binary(max_size=300))
def test_fields_round_trip_any_bytes(data):
    field = migrate.encode_field(data)
    assert migrate.decode_field(field) == data
    assert all(0x21 <= ord(char) <= 0x7E for char in field)
    assert "#" not in field and " " not in field


def test_text_stays_readable():
    assert migrate.encode_field(b"user:42/name=Ann_(admin)") == "user:42/name=Ann_(admin)"
    assert migrate.encode_field(b"a b%c#\n\xff") == "a%20b%25c%23%0A%FF"


@pytest.mark.parametrize("field", ["%zz", "%4", "a b", "caf\u00e9", "#x", "tab\t", "100%"])
def test_malformed_fields_are_refused(field):
    with pytest.raises(ValueError, match="malformed"):
        migrate.decode_field(field)


def test_lower_case_escapes_are_read():
    assert migrate.decode_field("%ff%0a") == b"\xff\n"


# --- export and import ---


def fill(database, records):
    for key, value in records.items():
        database[key] = value


def test_export_then_import_loses_nothing(dbopen, tmp_path):
    with dbopen(tmp_path / "source.db", "c") as source:
        fill(source, AWKWARD)
        dump = io.BytesIO()
        assert migrate.export_dump(source, dump) == len(AWKWARD)
    text = dump.getvalue()
    assert text.decode("ascii").count("\n") == len(AWKWARD) + 1  # a header line, then one a record
    with dbopen(tmp_path / "copy.db", "c") as copy:
        assert migrate.import_dump(io.BytesIO(text), copy) == len(AWKWARD)
    with dbopen(tmp_path / "copy.db", "r") as copy:
        assert dict(copy.items()) == AWKWARD


def test_dump_is_sorted_so_equal_databases_give_equal_dumps(dbopen, tmp_path):
    dumps = []
    for name, order in [("one", sorted(AWKWARD)), ("two", sorted(AWKWARD, reverse=True))]:
        with dbopen(tmp_path / name, "c") as database:
            for key in order:
                database[key] = AWKWARD[key]
            stream = io.BytesIO()
            migrate.export_dump(database, stream)
            dumps.append(stream.getvalue())
    assert dumps[0] == dumps[1]
    lines = dumps[0].splitlines()[1:]
    assert [migrate.decode_field(line.split(b" ")[0].decode()) for line in lines] == sorted(AWKWARD)


def test_import_takes_comments_blank_lines_and_crlf_and_replaces_values(dbopen, dbpath):
    dump = b"# a comment\r\n\r\nk%20one v1\r\nk2 \n\nk%20one v%2F2\n"
    with dbopen(dbpath, "c") as database:
        database[b"kept"] = b"old"
        assert migrate.import_dump(io.BytesIO(dump), database) == 3
        assert dict(database.items()) == {b"kept": b"old", b"k one": b"v/2", b"k2": b""}


@pytest.mark.parametrize(
    "line, message",
    [
        (b"only-a-key\n", "line 2: expected KEY VALUE separated by one space, found 1 field$"),
        (b"a b c\n", "line 2: expected KEY VALUE separated by one space, found 3 fields"),
        (b"k %zz\n", "line 2: malformed field"),
        (b"k caf\xc3\xa9\n", "line 2: not ASCII"),
    ],
)
def test_malformed_dump_line_is_value_error_naming_it_and_nothing_is_stored(
    dbopen, dbpath, line, message
):
    with dbopen(dbpath, "c") as database:
        database[b"first"] = b"before"
        with pytest.raises(ValueError, match=message):
            migrate.import_dump(io.BytesIO(b"first ok\n" + line + b"never reached\n"), database)
        assert dict(database.items()) == {b"first": b"before"}


#: Pieces of dump lines, good and bad.
PIECES = [b"a", b"%", b"0", b"F", b"%4", b" ", b"#", b"\r", b"\xe9"]


@given(st.lists(st.sampled_from(PIECES)).map(b"".join), st.sampled_from([b"", b"\n", b"\r\n"]))
@example(b"a b\r", b"\r\n")  # two carriage returns: the value would end in one
@example(b"a b c", b"\n")
@example(b"a %4", b"\n")
def test_the_fast_check_of_a_line_passes_only_what_the_parser_takes(body, end):
    raw = body + end
    fields = migrate._plain_record_fields(raw)
    if fields is not None:
        key, value = migrate._parse_line(1, raw)
        assert fields == len(key) + len(value)  # the bytes a batch is refused by


def test_the_fast_check_passes_the_lines_of_an_export():
    for key, value in AWKWARD.items():
        line = "%s %s\n" % (migrate.encode_field(key), migrate.encode_field(value))
        assert migrate._plain_record_fields(line.encode("ascii")) == len(key) + len(value)


def test_a_key_or_value_longer_than_semidbm_takes_is_refused_before_any_write(
    dbopen, dbpath, monkeypatch
):
    monkeypatch.setattr(migrate, "MAX_LENGTH", 4)  # a dump line of 2 GiB is too much for a test
    for dump, what in [(b"k 1234\nk2 12345\n", "values"), (b"k 1\nlong%00 1\n", "keys")]:
        with dbopen(dbpath, "c") as database:
            with pytest.raises(ValueError, match="dump line 2: semidbm %s are limited" % what):
                migrate.import_dump(io.BytesIO(dump), database)
            assert len(database) == 0


class Unseekable(io.RawIOBase):
    """A binary stream that cannot seek, like a pipe, over ``data``."""

    def __init__(self, data):
        self._data = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, buffer):
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


@pytest.fixture
def own_temporary_directory(tmp_path, monkeypatch):
    """The system's temporary directory, for this test: an empty one of its own."""
    place = tmp_path / "system-tmp"
    place.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(place))
    return place


def test_a_stream_that_cannot_seek_is_checked_whole_before_a_write(
    dbopen, dbpath, own_temporary_directory
):
    dump = b"".join(b"k%d v\n" % number for number in range(1000)) + b"bad line here\n"
    with dbopen(dbpath, "c") as database:
        with pytest.raises(ValueError, match="dump line 1001: "):
            migrate.import_dump(io.BufferedReader(Unseekable(dump)), database)
        assert len(database) == 0
        good = dump[: dump.index(b"bad")]
        assert migrate.import_dump(io.BufferedReader(Unseekable(good)), database) == 1000
        assert len(database) == 1000
    assert os.listdir(own_temporary_directory) == []


def test_a_pipe_is_imported_through_a_temporary_file_removed_after(
    dbopen, dbpath, own_temporary_directory
):
    dump = migrate.DUMP_HEADER.encode() + b"".join(b"k%d %d\n" % (n, n) for n in range(50_000))
    reading, writing = os.pipe()

    def write_all():
        with open(writing, "wb") as pipe:
            pipe.write(dump)

    writer = threading.Thread(target=write_all)
    writer.start()
    with open(reading, "rb") as pipe, dbopen(dbpath, "c") as database:
        assert not pipe.seekable()
        assert migrate.import_dump(pipe, database) == 50_000
        assert database[b"k49999"] == b"49999"
    writer.join()
    assert os.listdir(own_temporary_directory) == []


def test_import_reads_from_where_the_stream_stands(dbopen, dbpath):
    stream = io.BytesIO(b"not a dump line, already read\nk v\n")
    stream.readline()
    with dbopen(dbpath, "c") as database:
        assert migrate.import_dump(stream, database) == 1
        assert dict(database.items()) == {b"k": b"v"}


def test_a_dump_file_that_changes_while_it_is_checked_stores_nothing(dbopen, tmp_path):
    dump = tmp_path / "dump.txt"
    dump.write_bytes(b"k 1\nk 2\nk 3\n")

    def change_at_the_end(done, total):
        if done == total:
            dump.write_bytes(b"k 1\nk 2\nk 3\nk 4\n")

    with open(dump, "rb") as stream, dbopen(tmp_path / "db", "c") as database:
        with pytest.raises(ValueError, match="changed while it was checked .*; nothing was stored"):
            migrate.import_dump(stream, database, check_progress=change_at_the_end)
        assert len(database) == 0


@pytest.mark.parametrize(
    "new, how, stored",
    [
        (b"k 1\nk 2\na  \n", "dump line 3: expected .*, found 3 fields", 2),  # the same size
        (b"k 1\nk 2\nk 3\nk 4\n", "its size or modification time", 3),
    ],
    ids=["malformed", "longer"],
)
def test_a_dump_file_that_changes_while_it_is_stored_says_how_far_it_went(
    dbopen, tmp_path, new, how, stored
):
    dump = tmp_path / "dump.txt"
    dump.write_bytes(b"k 1\nk 2\nk 3\n")

    def change_after_the_first(done, total):
        if done == 4:
            with open(dump, "r+b") as rewritten:  # in place: the stream reads the new bytes
                rewritten.write(new)

    with open(dump, "rb", buffering=0) as raw, dbopen(tmp_path / "db", "c") as database:
        stream = io.BufferedReader(raw, buffer_size=4)  # reads what is there when it gets there
        expected = r"changed after it was checked \(%s\); the import stopped after %d records" % (
            how,
            stored,
        )
        with pytest.raises(ValueError, match=expected):
            migrate.import_dump(stream, database, change_after_the_first)
        assert database[b"k"] == b"%d" % stored


def test_a_dump_file_that_changes_while_it_is_stored_into_a_batch_stores_nothing(dbopen, tmp_path):
    dump = tmp_path / "dump.txt"
    dump.write_bytes(b"k 1\nk 2\nk 3\n")

    def change_after_the_first(done, total):
        if done == 4:
            with open(dump, "r+b") as rewritten:
                rewritten.write(b"k 1\nk 2\na  \n")

    with open(dump, "rb", buffering=0) as raw, dbopen(tmp_path / "db", "c", format=2) as database:
        database[b"k"] = b"before"
        stream = io.BufferedReader(raw, buffer_size=4)
        with pytest.raises(ValueError, match="the import stopped after 2 records"):
            with database.batch() as batch:
                migrate.import_dump(stream, batch, change_after_the_first)
        assert dict(database.items()) == {b"k": b"before"}


@pytest.mark.parametrize("kind", INTO_THE_DATABASE)
def test_export_refuses_to_write_into_the_database(dbopen, tmp_path, kind):
    path = tmp_path / "source.db"
    with dbopen(path, "c") as database:
        fill(database, AWKWARD)
    output = output_into_database(kind, path, tmp_path)
    before = files_of(path)
    with dbopen(path) as database:
        with pytest.raises(semidbm.error, match="refusing to write the dump to .*semidbm database"):
            migrate.export_dump(database, output)
    assert files_of(path) == before
    with dbopen(path) as database:
        assert dict(database.items()) == AWKWARD


def test_export_refuses_a_stream_on_a_database_file(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        fill(database, {b"k": b"v"})
    before = files_of(dbpath)
    with dbopen(dbpath) as database, open(dbpath / "data", "ab") as stream:
        with pytest.raises(semidbm.error, match="refusing to write the dump to .*data"):
            migrate.export_dump(database, stream)
    assert files_of(dbpath) == before


def test_export_to_a_path_writes_the_dump_there(dbopen, tmp_path):
    with dbopen(tmp_path / "source.db", "c") as database:
        fill(database, {b"k": b"v"})
        assert migrate.export_dump(database, tmp_path / "dump.txt") == 1
    assert (tmp_path / "dump.txt").read_bytes() == migrate.DUMP_HEADER.encode() + b"k v\n"


def test_export_and_import_report_progress(dbopen, dbpath):
    with dbopen(dbpath, "c") as database:
        fill(database, {b"a": b"1", b"b": b"2"})
        calls, sorted_calls = [], []
        stream = io.BytesIO()
        migrate.export_dump(
            database,
            stream,
            lambda *call: calls.append(call),
            lambda *call: sorted_calls.append(call),
        )
        assert calls == [(2, 2)]  # after each chunk of lines: one here
        assert sorted_calls[-1] == (2, 2)
        checked, stored = [], []
        migrate.import_dump(
            io.BytesIO(stream.getvalue()),
            database,
            lambda *call: stored.append(call),
            check_progress=lambda *call: checked.append(call),
        )
    header = len(migrate.DUMP_HEADER)
    size = header + 8
    assert checked == stored == [(header, size), (header + 4, size), (header + 8, size)]


# --- convert ---


def make_stdlib_database(module, path, records):
    with module.open(path, "c") as database:
        for key, value in records.items():
            database[key] = value


@pytest.mark.parametrize("name", ["dbm.dumb", "dbm.gnu", "dbm.ndbm"])
def test_convert_copies_a_stdlib_database_whole(name, tmp_path):
    # dbm.gnu and dbm.ndbm come with Debian's python3-gdbm (the nox sessions install it);
    # dbm.sqlite3, on Python 3.13 and later, is tested through the command below.
    module = pytest.importorskip(
        name, reason="this Python has no %s (Debian's own has it with python3-gdbm)" % name
    )
    source = str(tmp_path / "source")
    make_stdlib_database(module, source, AWKWARD)
    before = sorted(os.listdir(tmp_path))
    calls = []
    kind, count = migrate.convert(source, tmp_path / "new.db", lambda *call: calls.append(call))
    assert (kind, count) == (module.__name__, len(AWKWARD))
    assert calls[-1] == (len(AWKWARD), len(AWKWARD))
    with semidbm.open(tmp_path / "new.db") as converted:
        assert dict(converted.items()) == AWKWARD
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["new.db"])


def test_convert_passes_options_to_semidbm_open(tmp_path):
    make_stdlib_database(dbm.dumb, str(tmp_path / "source"), {b"k": b"v"})
    with pytest.raises(TypeError):
        migrate.convert(str(tmp_path / "source"), tmp_path / "new.db", no_such_option=1)
    migrate.convert(str(tmp_path / "source"), tmp_path / "new.db", buffer_size=0)
    with semidbm.open(tmp_path / "new.db") as converted:
        assert converted[b"k"] == b"v"


def test_convert_refuses_an_existing_destination_and_leaves_it(tmp_path):
    make_stdlib_database(dbm.dumb, str(tmp_path / "source"), {b"k": b"v"})
    with semidbm.open(tmp_path / "new.db", "c") as existing:
        existing[b"mine"] = b"keep"
    with pytest.raises(semidbm.error, match="already exists"):
        migrate.convert(str(tmp_path / "source"), tmp_path / "new.db")
    with semidbm.open(tmp_path / "new.db") as existing:
        assert dict(existing.items()) == {b"mine": b"keep"}


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda path: None, "no database at"),
        (
            lambda path: pathlib.Path(path).write_bytes(b"just some file, not a database"),
            "not a database that",
        ),
        (lambda path: semidbm.open(path, "c").close(), "already a semidbm database"),
    ],
    ids=["missing", "unknown", "semidbm"],
)
def test_convert_explains_a_source_it_cannot_take(tmp_path, make, message):
    source = str(tmp_path / "source")
    make(source)
    with pytest.raises(semidbm.error, match=message):
        migrate.convert(source, tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()


@pytest.mark.parametrize(
    "kind, module, files, where",
    [
        # whichdb knows a gdbm file by its magic number alone, and an ndbm one by its two files.
        ("dbm.gnu", "_gdbm", {"": struct.pack("=l", 0x13579ACE) + bytes(12)}, "python3-gdbm"),
        ("dbm.ndbm", "_dbm", {".pag": b"", ".dir": b""}, "libgdbm-compat-dev"),
    ],
)
def test_convert_on_a_python_without_the_module_says_where_it_is(
    tmp_path, monkeypatch, kind, module, files, where
):
    source = str(tmp_path / "source")
    for suffix, content in files.items():
        pathlib.Path(source + suffix).write_bytes(content)
    # This Python built without the module (as pyenv's, without the GNU dbm headers):
    # None in sys.modules makes importing it fail.
    monkeypatch.setitem(sys.modules, kind, None)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(semidbm.error) as refused:
        migrate.convert(source, tmp_path / "new.db")
    message = str(refused.value)
    assert "is a %s database, and this Python (%s, %d.%d) has no %s" % (
        (kind, sys.executable) + sys.version_info[:2] + (kind,)
    ) in message
    assert where in message and "/usr/bin/python3" in message
    assert not (tmp_path / "new.db").exists()


def test_a_failed_conversion_removes_what_it_wrote(tmp_path, monkeypatch):
    source = str(tmp_path / "source")
    make_stdlib_database(dbm.dumb, source, {b"%d" % number: b"v" for number in range(10)})
    real_open = dbm.open

    class FailsOnTheFifthRead:
        def __init__(self, database):
            self.database, self.reads = database, 0

        def keys(self):
            return self.database.keys()

        def __getitem__(self, key):
            self.reads += 1
            if self.reads == 5:
                raise OSError(5, "Input/output error")
            return self.database[key]

        def close(self):
            self.database.close()

    monkeypatch.setattr(dbm, "open", lambda *args: FailsOnTheFifthRead(real_open(*args)))
    with pytest.raises(OSError, match="Input/output"):
        migrate.convert(source, tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()


def python_with_sqlite3_dbm():
    """A Python (3.13 or later) that has dbm.sqlite3; the test is skipped if there is none."""
    candidates = [os.environ.get("SEMIDBM_SQLITE3_PYTHON"), sys.executable]
    candidates += sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")), reverse=True
    )
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import dbm.sqlite3"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    pytest.skip("no Python with dbm.sqlite3 (3.13+) found; set SEMIDBM_SQLITE3_PYTHON to one")


SQLITE3_SOURCE = """
import dbm.sqlite3, sys
with dbm.sqlite3.open(sys.argv[1], "c") as database:
    database[b"text"] = b"value"
    database[bytes(range(256))] = b""
    database[b"large"] = bytes(range(256)) * 8192
"""


def convert_with(python, source, destination):
    """``semidbm convert`` of this checkout (pure kernel) run by ``python``."""
    environment = dict(os.environ, PYTHONPATH=SOURCE_DIRECTORY, SEMIDBM_PURE_PYTHON="1")
    return subprocess.run(
        [python, "-m", "semidbm", "convert", str(source), str(destination)],
        env=environment,
        capture_output=True,
        text=True,
    )


def test_the_command_converts_sqlite3_on_a_python_that_has_it(tmp_path):
    python = python_with_sqlite3_dbm()
    source = str(tmp_path / "source.sqlite")
    subprocess.run([python, "-c", SQLITE3_SOURCE, source], check=True)
    result = convert_with(python, source, tmp_path / "new.db")
    assert result.returncode == 0, result.stderr
    assert "from the dbm.sqlite3 database" in result.stdout
    with semidbm.open(tmp_path / "new.db") as converted:
        assert dict(converted.items()) == {
            b"text": b"value",
            bytes(range(256)): b"",
            b"large": bytes(range(256)) * 8192,
        }


def test_convert_says_when_a_gdbm_source_is_locked(tmp_path):
    gnu = pytest.importorskip(
        "dbm.gnu", reason="this Python has no dbm.gnu (Debian's own has it with python3-gdbm)"
    )
    source = str(tmp_path / "source")
    with gnu.open(source, "c") as writer:
        writer[b"k"] = b"v"
        with pytest.raises(semidbm.error, match="locked by a process"):
            migrate.convert(source, tmp_path / "new.db")
    assert not (tmp_path / "new.db").exists()


# --- SQLite sources: dbm.sqlite3 before Python 3.13, sqlitedict ---

#: The table dbm.sqlite3 (Python 3.13) makes, as it writes it.
DBM_SQLITE3_TABLE = (
    "CREATE TABLE Dict (\n    key BLOB UNIQUE NOT NULL,\n    value BLOB NOT NULL\n  )"
)


def make_dbm_sqlite3(path):
    make_sqlite(
        path,
        DBM_SQLITE3_TABLE,
        rows=[("INSERT INTO Dict VALUES (?, ?)", (b"key", b"value"))],
    )


def refused(source, message):
    """Check that converting ``source`` is refused with ``message`` and leaves its directory."""
    place = os.path.dirname(source)
    before = files_of(place)
    with pytest.raises(semidbm.error, match=message):
        migrate.convert(source, os.path.join(place, "new.db"))
    assert files_of(place) == before


def test_a_dbm_sqlite3_source_on_a_python_without_it_says_it_needs_3_13(tmp_path, monkeypatch):
    source = str(tmp_path / "cache.sqlite3")
    make_dbm_sqlite3(source)
    monkeypatch.setattr(migrate, "_has_dbm_sqlite3", lambda: False)
    refused(
        source,
        r"is a dbm.sqlite3 database: converting it needs Python 3.13 or newer \(dbm.sqlite3\), "
        r"and this is Python %d.%d$" % sys.version_info[:2],
    )


def test_a_dbm_sqlite3_source_on_this_python(tmp_path):
    source = str(tmp_path / "cache.sqlite3")
    make_dbm_sqlite3(source)
    if sys.version_info < (3, 13):
        refused(source, "needs Python 3.13 or newer")
        return
    assert migrate.convert(source, tmp_path / "new.db") == ("dbm.sqlite3", 1)
    with semidbm.open(tmp_path / "new.db") as converted:
        assert dict(converted.items()) == {b"key": b"value"}


@pytest.mark.parametrize(
    "tables, message",
    [
        (
            ["unnamed"],
            r"is a sqlitedict database \(table 'unnamed'\), not a dbm: its values are pickled "
            r"Python objects, for a shelf; copy them in Python: with semidbm.open_shelf\(DST\) as "
            r"shelf: shelf.update\(sqlitedict.SqliteDict\('.*source.sqlite', "
            r"tablename='unnamed'\).items\(\)\)$",
        ),
        (["users", "Dict"], r"\(tables 'Dict', 'users'\), .*tablename=TABLE\)"),
    ],
    ids=["one table", "two tables"],
)
def test_a_sqlitedict_source_is_refused_saying_how_to_copy_it(tmp_path, tables, message):
    source = str(tmp_path / "source.sqlite")
    make_sqlite(
        source,
        *[SQLITEDICT_TABLE % name for name in tables],
        rows=[('INSERT INTO "%s" VALUES (?, ?)' % tables[0], ("k", pickle.dumps({"a": 1})))],
    )
    refused(source, message)


def test_another_sqlite_database_is_refused_as_neither(tmp_path):
    source = str(tmp_path / "app.sqlite")
    make_sqlite(source, "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    refused(source, "is an SQLite database, but not one of dbm.sqlite3 .* or sqlitedict$")


def test_a_damaged_sqlite_file_is_an_error_that_says_so(tmp_path):
    source = str(tmp_path / "damaged.sqlite")
    pathlib.Path(source).write_bytes(b"SQLite format 3\x00" + b"\xff" * 2000)
    refused(source, "cannot read the SQLite database .*damaged.sqlite: ")


def test_a_sqlitedict_source_on_a_python_with_dbm_sqlite3(tmp_path):
    # There, dbm.whichdb calls any SQLite file dbm.sqlite3, which then fails: "no such table".
    python = python_with_sqlite3_dbm()
    source = str(tmp_path / "source.sqlite")
    make_sqlite(source, SQLITEDICT_TABLE % "unnamed")
    result = convert_with(python, source, tmp_path / "new.db")
    assert result.returncode == 1
    assert "is a sqlitedict database (table 'unnamed')" in result.stderr
    assert not (tmp_path / "new.db").exists()
