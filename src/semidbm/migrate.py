"""Moving data into semidbm: from the stdlib dbm modules, and through a text dump.

- :func:`convert` copies any database the standard library's
  :func:`dbm.open` opens (``dbm.gnu``, ``dbm.ndbm``, ``dbm.dumb``, and
  ``dbm.sqlite3`` on Pythons that have it) into a new semidbm database.
  It says what a source it cannot take is: one of ``dbm.sqlite3`` on a
  Python older than 3.13, or of ``sqlitedict`` (whose values are pickled
  objects, for a shelf).
- :func:`export_dump` and :func:`import_dump` write and read a dump: a
  portable, binary-safe text file with one record a line. An export
  never writes into the database it reads (its files, links to them,
  or anything in its directory): it refuses such an output. An import
  checks the whole dump before it stores the first record; into a
  :class:`semidbm.Batch`, it is all or nothing.

The dump format: ASCII text; lines starting with ``#`` are
comments and blank lines are ignored; every other line is ``KEY VALUE``,
the two fields separated by one space. In a field, the printable ASCII
characters other than space, ``%`` and ``#`` stand for themselves and
every other byte is ``%XX`` (two hex digits), as in URLs (RFC 3986), so
text stays readable and any bytes survive. An empty field is empty (an
empty value leaves the line ending in the space). A line may end in
``\\n`` or ``\\r\\n``.
"""

from __future__ import annotations

import contextlib
import dbm
import errno
import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any, Protocol, Union

from . import _files, _order
from . import open as _open_semidbm
from ._batch import Batch

# The dump's fields, part of this module's interface (the kernels write them too).
from ._fields import BAD_ESCAPE, FIELD_CHARACTERS
from ._fields import decode_field as decode_field
from ._fields import encode_field as encode_field
from ._messages import DUMP_OVER_BATCH, TOO_LONG
from ._progress import noun, quantity
from .errors import DBMError
from .format import DATA_NAME, EMPTY_RECORD_SIZE, MAGIC, MAX_LENGTH

if TYPE_CHECKING:
    from ._database import Database
    from ._types import Data

#: A path, as the functions take it.
_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: A progress callback: called with (work done, work in all), in the unit its function says.
_Progress = Callable[[int, int], object]


class _RecordSink(Protocol):
    """What :func:`import_dump` stores records in: a semidbm database, a batch, any mapping."""

    def __setitem__(self, key: bytes, value: bytes, /) -> None: ...


#: The characters of a record line: its fields' and the space between them.
_RECORD_CHARACTERS = FIELD_CHARACTERS + b" "

#: The first line of a dump, a comment saying what follows.
DUMP_HEADER = (
    "# semidbm dump: one record a line, KEY VALUE, "
    "each byte not printable ASCII or space % # as %XX\n"
)

#: The message of a refused dump output: its name and why.
_REFUSAL = "refusing to write the dump to %s: it is %s"


def export_dump(
    database: Database,
    output: _Path | IO[bytes],
    progress: _Progress | None = None,
    sort_progress: _Progress | None = None,
    *,
    prefix: Data | None = None,
) -> int:
    """Write every record of the open semidbm ``database`` to ``output`` as a dump.

    Records are written in key order, so dumps of equal databases are
    equal. With ``prefix``, only those whose keys start with it.

    Args:
        database: an open semidbm database (read-only will do).
        output: a binary stream, or the path of a file to create (or
            replace).
        progress: called as ``progress(done, total)`` with the count of
            records written.
        sort_progress: called as ``sort_progress(done, total)`` with the
            keys in their place while they are sorted, first.
        prefix: a key (``str`` as UTF-8, or bytes-like), as for
            :meth:`semidbm.Database.keys`; None for every record.

    Returns:
        int: the count of records written.

    Raises:
        semidbm.error: ``output`` is one of the database's own files (by
            its name, a symlink or a hard link) or anywhere inside its
            directory: writing there would destroy the database being
            read. Refused before a path is opened or a stream written to
            (opening such a file with ``"wb"`` already truncates it: pass
            the path).

    >>> with semidbm.open("cache.db", "c") as db:
    ...     db[b"key"] = b"two words"
    ...     semidbm.migrate.export_dump(db, "cache.dump")
    1
    >>> print(open("cache.dump").read(), end="")
    # semidbm dump: one record a line, KEY VALUE, each byte not printable ASCII or space % # as %XX
    key two%20words
    """
    directory = os.path.dirname(database.path)
    if isinstance(output, (str, bytes, os.PathLike)):
        _refuse_path_in_database(output, directory)
    low, high = _order.key_range(None, None, prefix)
    if isinstance(output, (str, bytes, os.PathLike)):
        _refuse_path_in_database(output, directory)
        with open(output, "wb") as stream:
            return _write_dump(database, stream, progress, sort_progress, low, high)
    _refuse_stream_in_database(output, directory)
    return _write_dump(database, output, progress, sort_progress, low, high)


def _write_dump(
    database: Database,
    stream: IO[bytes],
    progress: _Progress | None,
    sort_progress: _Progress | None,
    low: bytes,
    high: bytes | None,
) -> int:
    """Write the dump of ``database`` to ``stream``: the body of :func:`export_dump`.

    The kernel sorts the keys from ``low`` up to ``high`` and makes the
    lines (in C with the compiled kernel), a chunk at a time.
    """
    count, chunks = database._sorted_lines("dump", sort_progress, low, high)
    stream.write(DUMP_HEADER.encode("ascii"))
    done = 0
    for lines, chunk in chunks:
        stream.write(chunk)
        done += lines
        if progress is not None:
            progress(done, count)
    return count


def _refuse_path_in_database(output: _Path, directory: str) -> None:
    """Raise :class:`semidbm.error` if the path ``output`` leads into the database ``directory``.

    Refused: a path that resolves (symlinks and ``..`` followed, by
    :func:`os.path.realpath`) to the directory or anything inside it, and
    an existing file that is one of the database's files, however it is
    named (a hard link has another path but the same device and inode).
    """
    output = os.fsdecode(os.fspath(output))
    resolved, home = os.path.realpath(output), os.path.realpath(directory)
    if os.path.commonpath([resolved, home]) == home:
        raise DBMError(_REFUSAL % (output, "inside the semidbm database %s" % directory))
    try:
        info = os.stat(output)
    except OSError:  # not there yet, so no database file; opening it says what else is wrong
        return
    _refuse_database_file(output, info, directory)


def _refuse_stream_in_database(stream: IO[bytes], directory: str) -> None:
    """Raise :class:`semidbm.error` if the file under ``stream`` is one of ``directory``'s files.

    Catches, for one, a shell appending standard output to the data file.
    A stream with no file under it (``io.BytesIO``) passes.
    """
    try:
        info = os.fstat(stream.fileno())
    except (AttributeError, OSError):  # io.UnsupportedOperation is an OSError
        return
    _refuse_database_file(getattr(stream, "name", "the stream"), info, directory)


def _refuse_database_file(name: str, info: os.stat_result, directory: str) -> None:
    """Raise :class:`semidbm.error` if ``info`` (a stat result) is a file's in ``directory``."""
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                same = os.path.samestat(entry.stat(), info)
            except OSError:  # a dangling symlink: no file to overwrite
                continue
            if same:
                what = "the file %s of the semidbm database %s" % (entry.name, directory)
                raise DBMError(_REFUSAL % (name, what))


def import_dump(
    stream: IO[bytes],
    database: _RecordSink,
    progress: _Progress | None = None,
    *,
    check_progress: _Progress | None = None,
) -> int:
    """Store every record of the dump read from the binary ``stream`` in ``database``.

    The whole dump is checked before the first record is stored, so it
    is read twice, from where ``stream`` stands: a stream that cannot
    seek (a pipe) is first copied to a temporary file in the system's
    temporary directory, removed when the import ends. A key already
    present takes the dump's value (a key given twice, the later).

    Into a database, a failure while storing (a full disk) or an
    interrupt leaves the records stored before it, the dump's first
    ones, in order. Into a :class:`semidbm.Batch` (``with db.batch() as
    batch: import_dump(stream, batch)``, format 2.0), it is all or
    nothing: the batch commits every record, or the exception discards
    it; a dump whose records add up to more than the batch can take
    (2 GiB - 1 in all, each record 12 bytes more than its key and value,
    counted once per line) is refused before the first is stored.

    Args:
        stream: the dump, a binary stream.
        database: an open semidbm database, a batch of one, or any mapping.
        progress: called as ``progress(done, total)`` while the records
            are stored, with the bytes of the dump read so far and its size.
        check_progress: the same, while the dump is checked.

    Returns:
        int: the count of records stored.

    Raises:
        ValueError: a malformed line, or a key or value longer than
            semidbm takes, naming its line number (nothing is stored);
            a dump too large for the batch it is given (nothing is
            stored); or a file that changed during the import (its size
            or modification time): before the first write if it changed
            while it was checked, else after, saying after how many
            records it stopped.

    >>> with open("words.dump", "wb") as dump:
    ...     dump.write(b"one 1\\ntwo%20words 2\\n")
    20
    >>> with semidbm.open("words.db", "c") as db, open("words.dump", "rb") as dump:
    ...     semidbm.migrate.import_dump(dump, db)
    ...     sorted(db.items())
    2
    [(b'one', b'1'), (b'two words', b'2')]
    """
    with _rereadable(stream) as source:
        start = source.tell()
        size = source.seek(0, os.SEEK_END) - start
        source.seek(start)
        before = _file_state(source)
        records = _check_dump(source, size, check_progress)
        if _file_state(source) != before:
            raise ValueError(
                "the dump changed while it was checked (its size or modification time); "
                "nothing was stored"
            )
        room = database._room() if isinstance(database, Batch) else None
        if room is not None and records > room:
            raise ValueError(DUMP_OVER_BATCH % (quantity(records, "byte"), quantity(room, "byte")))
        source.seek(start)
        stored = _store_dump(source, size, database, progress)
        if _file_state(source) != before:
            raise _changed("its size or modification time", stored)
        return stored


@contextlib.contextmanager
def _rereadable(stream: IO[bytes]) -> Iterator[IO[bytes]]:
    """``stream`` if it can seek; else a temporary file with the rest of it, removed at the end."""
    if _seekable(stream):
        yield stream
        return
    with tempfile.TemporaryFile(prefix="semidbm-import-") as spool:
        while True:
            chunk = stream.read(1 << 20)
            if not chunk:
                break
            with _writing_the_copy():
                # Past the file object's buffer: a write that fails leaves nothing in it
                # for closing to write again (and fail with another error).
                _files.write_all(spool.fileno(), chunk)
        spool.seek(0)
        yield spool


@contextlib.contextmanager
def _writing_the_copy() -> Iterator[None]:
    """Name the temporary directory in an error writing the copy of a dump (a full disk)."""
    try:
        yield
    except OSError as exc:
        what = "%s (a temporary copy of the dump)" % exc.strerror
        raise OSError(exc.errno, what, tempfile.gettempdir()) from None


def _file_state(stream: IO[bytes]) -> tuple[int, int] | None:
    """The size and modification time of the file under ``stream``; None if there is none."""
    try:
        info = os.fstat(stream.fileno())
    except (AttributeError, OSError, ValueError):  # io.BytesIO: io.UnsupportedOperation
        return None
    return info.st_size, info.st_mtime_ns


def _seekable(stream: IO[bytes]) -> bool:
    """Whether ``stream`` can go back (a file can, a pipe, a terminal or a socket cannot)."""
    try:
        return stream.seekable()
    except (AttributeError, ValueError):  # no such method; closed
        return False


def _lines(source: IO[bytes], size: int) -> Iterator[tuple[int, bytes]]:
    """The lines, numbered from 1, of the next ``size`` bytes of ``source`` (fewer if it ends)."""
    number = 0
    while size > 0:
        raw = source.readline(size)
        if not raw:
            return
        size -= len(raw)
        number += 1
        yield number, raw


def _parse_line(number: int, raw: bytes) -> tuple[bytes, bytes] | None:
    """The record of the dump line ``raw`` (line ``number``), None for a comment or blank line.

    Raises ValueError, naming the line, if it is malformed or holds more
    bytes than a semidbm key or value may have.
    """
    try:
        line = raw.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError("dump line %d: not ASCII text" % number) from None
    line = line.rstrip("\n")
    if line.endswith("\r"):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    fields = line.split(" ")
    if len(fields) != 2:
        raise ValueError(
            "dump line %d: expected KEY VALUE separated by one space, found %s"
            % (number, quantity(len(fields), "field"))
        )
    try:
        key, value = decode_field(fields[0]), decode_field(fields[1])
    except ValueError as exc:
        raise ValueError("dump line %d: %s" % (number, exc)) from None
    if len(key) > MAX_LENGTH or len(value) > MAX_LENGTH:
        what = "keys" if len(key) > MAX_LENGTH else "values"
        raise ValueError("dump line %d: %s" % (number, TOO_LONG % what))
    return key, value


def _check_dump(source: IO[bytes], size: int, progress: _Progress | None) -> int:
    """Check the ``size`` bytes of dump at ``source``, storing nothing: ValueError if malformed.

    Returns the bytes of the records its lines make, as a batch counts
    them (a key given twice counts twice), for :func:`import_dump` to
    refuse a dump too large for a batch before it stores anything.
    """
    done = records = 0
    for number, raw in _lines(source, size):
        done += len(raw)
        fields = _plain_record_fields(raw)
        if fields is None:
            # A comment, a blank line, or an error that says what is wrong.
            record = _parse_line(number, raw)
            fields = None if record is None else len(record[0]) + len(record[1])
        if fields is not None:
            records += EMPTY_RECORD_SIZE + fields
        if progress is not None:
            progress(done, size)
    return records


def _plain_record_fields(raw: bytes) -> int | None:
    """The bytes of the key and value of the dump line ``raw``, decoded; None if not plain.

    A fast, strict test of a record :func:`_parse_line` takes: it passes
    most lines of a dump without decoding their fields (halving the time
    of the check); it fails comments, blank lines and malformed lines,
    which :func:`_parse_line` then judges, saying what is wrong.
    """
    line = raw[:-1] if raw.endswith(b"\n") else raw
    if line.endswith(b"\r"):
        line = line[:-1]
    plain = (
        line.count(b" ") == 1
        and not line.translate(None, _RECORD_CHARACTERS)
        and BAD_ESCAPE.search(line) is None
        and len(line) <= MAX_LENGTH  # then so is each field, decoded
    )
    # Each %XX is three characters for one byte; the space is no byte of either field.
    return len(line) - 1 - 2 * line.count(b"%") if plain else None


def _store_dump(
    source: IO[bytes], size: int, database: _RecordSink, progress: _Progress | None
) -> int:
    """Store the records of the ``size`` bytes of checked dump at ``source``; return their count.

    The dump is parsed again as it is stored: a malformed line now means
    that the file changed since it was checked.
    """
    stored = done = 0
    for number, raw in _lines(source, size):
        done += len(raw)
        try:
            record = _parse_line(number, raw)
        except ValueError as exc:
            raise _changed(str(exc), stored) from None
        if record is not None:
            database[record[0]] = record[1]
            stored += 1
        if progress is not None:
            progress(done, size)
    return stored


def _changed(how: str, stored: int) -> ValueError:
    """The error of a dump file that changed (``how``) after it was checked.

    It says how far the import went (``stored`` records given to the
    database or batch), not what they became: a batch the error
    discards keeps none of them.
    """
    return ValueError(
        "the dump changed after it was checked (%s); the import stopped after %s"
        % (how, quantity(stored, "record"))
    )


def is_semidbm_database(path: _Path) -> bool:
    """True if ``path`` is a directory holding a data file that starts like semidbm's.

    >>> semidbm.open("cache.db", "c").close()
    >>> semidbm.migrate.is_semidbm_database("cache.db")
    True
    """
    return _starts_with(os.path.join(os.fsdecode(os.fspath(path)), DATA_NAME), MAGIC)


def _starts_with(path: str, magic: bytes) -> bool:
    """Whether ``path`` is a file that can be read and starts with the bytes ``magic``."""
    try:
        with open(path, "rb") as file:
            return file.read(len(magic)) == magic
    except OSError:
        return False


def source_kind(source: _Path) -> str:
    """The stdlib module that :func:`dbm.open` would use for ``source`` (``"dbm.gnu"``, ...).

    Args:
        source: what you would pass to :func:`dbm.open`.

    Returns:
        str: the module's name, as :func:`dbm.whichdb` gives it.

    Raises:
        semidbm.error: there is none, with a message that says why: no
            such database, one of unknown type, or semidbm's own; an
            SQLite file that is a ``dbm.sqlite3`` database on a Python
            without that module (before 3.13), a ``sqlitedict`` one, or
            neither; a ``dbm.gnu`` or ``dbm.ndbm`` database on a Python
            built without that module (saying which Python or package
            has it).

    >>> import dbm.dumb
    >>> dbm.dumb.open("old", "c").close()
    >>> semidbm.migrate.source_kind("old")
    'dbm.dumb'
    """
    source = os.fsdecode(os.fspath(source))
    if is_semidbm_database(source):
        raise DBMError("%s is already a semidbm database; semidbm opens it as it is" % source)
    kind = dbm.whichdb(source)
    if kind is None:
        raise DBMError("no database at %s (or it cannot be read)" % source)
    if kind in ("", "dbm.sqlite3") and _starts_with(source, _SQLITE_MAGIC):
        return _sqlite_kind(source)
    if kind == "":
        raise DBMError("%s is not a database that the standard library's dbm knows" % source)
    if kind in _WHERE_TO_GET:
        _check_importable(kind, source)
    return kind


#: For each dbm module that some Pythons lack, its C module and where a Python gets it
#: (``{version}``: this Python's, as "3.12").
_WHERE_TO_GET = {
    "dbm.gnu": (
        "_gdbm",
        "Debian's and Ubuntu's own Python (/usr/bin/python3) gets it from the package "
        "python3-gdbm (apt install python3-gdbm), Homebrew's from python-gdbm@{version}; "
        "a Python built from source (pyenv) has it if the GNU dbm headers were installed "
        "when it was built (Debian: libgdbm-dev)",
    ),
    "dbm.ndbm": (
        "_dbm",
        "Debian's and Ubuntu's own Python (/usr/bin/python3) has it; a Python built from "
        "source (pyenv) has it if the ndbm headers were installed when it was built "
        "(Debian: libgdbm-compat-dev)",
    ),
}


def _check_importable(kind: str, source: str) -> None:
    """Raise DBMError, saying where to get it, if this Python cannot import ``kind``.

    ``dbm.open`` alone would say only that the module is not available:
    a user whose Python was built without it must learn which Python,
    or which package, has it.
    """
    try:
        importlib.import_module(kind)
    except ImportError:
        module, where = _WHERE_TO_GET[kind]
        version = "%d.%d" % sys.version_info[:2]
        raise DBMError(
            "%s is a %s database, and this Python (%s, %s) has no %s (its C module %s was "
            "not built): %s. Run the conversion with a Python that has it (where "
            "`python3 -c 'import %s'` succeeds), with semidbm installed there"
            % (source, kind, sys.executable, version, kind, module, where.format(version=version),
               kind)
        ) from None


#: The first bytes of every SQLite 3 database file.
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: The columns, (name, declared type), of dbm.sqlite3's one table, "Dict".
_DBM_SQLITE3_COLUMNS = [("key", "BLOB"), ("value", "BLOB")]
#: The columns of each table of a sqlitedict file (its default table is "unnamed").
_SQLITEDICT_COLUMNS = [("key", "TEXT"), ("value", "BLOB")]


def _sqlite_kind(path: str) -> str:
    """``"dbm.sqlite3"`` for a database of that module that this Python can open; else refused.

    The tables tell the SQLite files apart: dbm.sqlite3 makes one,
    ``Dict``, of BLOB keys and values; sqlitedict makes tables of TEXT
    keys and BLOB values (pickles, by default). A sqlitedict database is
    refused, saying how to copy it: its values are Python objects, so it
    belongs in a shelf, and only sqlitedict knows how it encoded them.
    """
    tables = _sqlite_tables(path)
    if tables.get("Dict") == _DBM_SQLITE3_COLUMNS:
        if not _has_dbm_sqlite3():
            raise DBMError(
                "%s is a dbm.sqlite3 database: converting it needs Python 3.13 or newer "
                "(dbm.sqlite3), and this is Python %d.%d" % ((path,) + sys.version_info[:2])
            )
        return "dbm.sqlite3"
    if tables and all(columns == _SQLITEDICT_COLUMNS for columns in tables.values()):
        names = sorted(tables)
        raise DBMError(
            "%s is a sqlitedict database (%s %s), not a dbm: its values are pickled Python "
            "objects, for a shelf; copy them in Python: with semidbm.open_shelf(DST) as shelf: "
            "shelf.update(sqlitedict.SqliteDict(%r, tablename=%s).items())"
            % (
                path,
                noun("table", len(names)),
                ", ".join(map(repr, names)),
                path,
                repr(names[0]) if len(names) == 1 else "TABLE",
            )
        )
    raise DBMError(
        "%s is an SQLite database, but not one of dbm.sqlite3 (no table Dict of BLOB key "
        "and value) or sqlitedict" % path
    )


def _sqlite_tables(path: str) -> dict[str, list[tuple[str, str]]]:
    """The tables of the SQLite database at ``path``, each with its (name, type) columns.

    The file is opened read-only; an error reading it (no sqlite3
    module, a locked or damaged file) is a :class:`semidbm.error`.
    """
    import urllib.request  # here: it takes a while to import, and few commands need it

    try:
        import sqlite3
    except ImportError:
        raise DBMError(
            "%s is an SQLite file, and this Python has no sqlite3 module to read it" % path
        ) from None
    uri = "file:%s?mode=ro" % urllib.request.pathname2url(os.path.abspath(path))
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as connection:
            names = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            return {
                name: [
                    (column[1], column[2].upper())
                    for column in connection.execute(
                        'PRAGMA table_info("%s")' % name.replace('"', '""')
                    )
                ]
                for (name,) in names.fetchall()
            }
    except sqlite3.Error as exc:
        raise DBMError("cannot read the SQLite database %s: %s" % (path, exc)) from None


def _has_dbm_sqlite3() -> bool:
    """Whether this Python has ``dbm.sqlite3`` (3.13 and later, built with sqlite3)."""
    try:
        importlib.import_module("dbm.sqlite3")
    except ImportError:
        return False
    return True


def convert(
    source: _Path,
    destination: _Path,
    progress: _Progress | None = None,
    **options: Any,
) -> tuple[str, int]:
    """Copy the stdlib dbm database ``source`` into a new semidbm database ``destination``.

    Args:
        source: what you would pass to :func:`dbm.open`; it is opened
            read-only.
        destination: the new database's path, which must not exist; on
            failure the part of it that was written is removed.
        progress: called as ``progress(done, total)`` with the count of
            keys copied.
        **options: passed to :func:`semidbm.open`.

    Returns:
        tuple[str, int]: the source's module name (as
        :func:`dbm.whichdb` gives it) and the number of keys copied.

    Raises:
        semidbm.error: ``destination`` exists, or ``source`` cannot be
            copied, saying why (:func:`source_kind`).

    >>> import dbm.dumb
    >>> with dbm.dumb.open("old", "c") as old:
    ...     old[b"key"] = b"value"
    >>> semidbm.migrate.convert("old", "new.db")
    ('dbm.dumb', 1)
    """
    kind = source_kind(source)
    name, new_name = os.fsdecode(os.fspath(source)), os.fsdecode(os.fspath(destination))
    if os.path.lexists(new_name):
        raise DBMError("%s already exists; convert writes a new database" % new_name)
    try:
        old = dbm.open(name, "r")
    except dbm.error[0] as exc:  # not an OSError: "the module is not available"
        raise DBMError("cannot open %s: %s" % (name, exc)) from None
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
            message = "locked by a process that has it open for writing"
            raise DBMError(exc.errno, message, source) from None
        raise
    try:
        new = _open_semidbm(new_name, "n", **options)
        try:
            keys = old.keys()
            for done, key in enumerate(keys, 1):
                new[key] = old[key]
                if progress is not None:
                    progress(done, len(keys))
            new.close()
        except BaseException:
            new.close()
            shutil.rmtree(new_name, ignore_errors=True)
            raise
    finally:
        old.close()
    return kind, len(keys)
