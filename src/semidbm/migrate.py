"""Moving data into semidbm: from the stdlib dbm modules, and through a text dump.

- :func:`convert` copies any database the standard library's
  :func:`dbm.open` opens (``dbm.gnu``, ``dbm.ndbm``, ``dbm.dumb``, and
  ``dbm.sqlite3`` on Pythons that have it) into a new semidbm database.
- :func:`export_dump` and :func:`import_dump` write and read a dump: a
  portable, binary-safe text file with one record a line. An export
  never writes into the database it reads (its files, links to them,
  or anything in its directory): it refuses such an output.

The dump format: ASCII text; lines starting with ``#`` are
comments and blank lines are ignored; every other line is ``KEY VALUE``,
the two fields separated by one space. In a field, the printable ASCII
characters other than space, ``%`` and ``#`` stand for themselves and
every other byte is ``%XX`` (two hex digits), as in URLs (RFC 3986), so
text stays readable and any bytes survive. An empty field is empty (an
empty value leaves the line ending in the space). A line may end in
``\\n`` or ``\\r\\n``.
"""

import dbm
import errno
import os
import shutil

from . import db as _db

# The dump's fields, part of this module's interface (the kernels write them too).
from ._fields import decode_field as decode_field
from ._fields import encode_field as encode_field
from .errors import DBMError
from .format import DATA_NAME, MAGIC

#: The first line of a dump, a comment saying what follows.
DUMP_HEADER = (
    "# semidbm dump: one record a line, KEY VALUE, "
    "each byte not printable ASCII or space % # as %XX\n"
)

#: The message of a refused dump output: its name and why.
_REFUSAL = "refusing to write the dump to %s: it is %s"


def export_dump(database, output, progress=None, sort_progress=None):
    """Write every record of the open semidbm ``database`` to ``output`` as a dump.

    ``output`` is a binary stream or the path of a file to create (or
    replace). Records are written in key order, so dumps of equal
    databases are equal. ``progress(done, total)``, if given, is called
    with the count of records written, and ``sort_progress(done,
    total)`` with the keys in their place while they are sorted first.
    Returns the count of records.

    An output that is one of the database's own files (by its name, a
    symlink or a hard link) or anywhere inside its directory is refused
    with :class:`semidbm.error`, before a path is opened or a stream
    written to: writing there would destroy the database being read.
    (Opening such a file with ``"wb"`` already truncates it: pass the path.)
    """
    directory = os.path.dirname(database.path)
    if isinstance(output, (str, bytes, os.PathLike)):
        _refuse_path_in_database(output, directory)
        with open(output, "wb") as stream:
            return _write_dump(database, stream, progress, sort_progress)
    _refuse_stream_in_database(output, directory)
    return _write_dump(database, output, progress, sort_progress)


def _write_dump(database, stream, progress, sort_progress):
    """Write the dump of ``database`` to ``stream``: the body of :func:`export_dump`.

    The kernel sorts the keys and makes the lines (in C with the
    compiled kernel), a chunk at a time.
    """
    count, chunks = database._sorted_lines("dump", sort_progress)
    stream.write(DUMP_HEADER.encode("ascii"))
    done = 0
    for lines, chunk in chunks:
        stream.write(chunk)
        done += lines
        if progress is not None:
            progress(done, count)
    return count


def _refuse_path_in_database(output, directory):
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


def _refuse_stream_in_database(stream, directory):
    """Raise :class:`semidbm.error` if the file under ``stream`` is one of ``directory``'s files.

    Catches, for one, a shell appending standard output to the data file.
    A stream with no file under it (``io.BytesIO``) passes.
    """
    try:
        info = os.fstat(stream.fileno())
    except (AttributeError, OSError):  # io.UnsupportedOperation is an OSError
        return
    _refuse_database_file(getattr(stream, "name", "the stream"), info, directory)


def _refuse_database_file(name, info, directory):
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


def import_dump(stream, database, progress=None):
    """Store every record of the dump read from the binary ``stream`` in the open ``database``.

    A key already present takes the dump's value. A malformed line raises
    ValueError naming its number, after the records before it were
    stored. ``progress(done, total)``, if given, is called with the bytes
    read so far (``total`` is None). Returns the count of records read.
    """
    count = 0
    consumed = 0
    for number, raw in enumerate(stream, 1):
        consumed += len(raw)
        try:
            line = raw.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError("dump line %d: not ASCII text" % number) from None
        line = line.rstrip("\n")
        if line.endswith("\r"):
            line = line[:-1]
        if not line or line.startswith("#"):
            continue
        fields = line.split(" ")
        if len(fields) != 2:
            raise ValueError(
                "dump line %d: expected KEY VALUE separated by one space, found %d fields"
                % (number, len(fields))
            )
        try:
            key, value = decode_field(fields[0]), decode_field(fields[1])
        except ValueError as exc:
            raise ValueError("dump line %d: %s" % (number, exc)) from None
        database[key] = value
        count += 1
        if progress is not None:
            progress(consumed, None)
    return count


def is_semidbm_database(path):
    """True if ``path`` is a directory holding a data file that starts like semidbm's."""
    data_path = os.path.join(path, DATA_NAME)
    try:
        with open(data_path, "rb") as data:
            return data.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def source_kind(source):
    """The stdlib module that :func:`dbm.open` would use for ``source`` (``"dbm.gnu"``, ...).

    Raises :class:`semidbm.error` with a message that says why when
    there is none: no such database, one of unknown type, or semidbm's own.
    """
    source = os.fsdecode(os.fspath(source))
    if is_semidbm_database(source):
        raise DBMError("%s is already a semidbm database; semidbm opens it as it is" % source)
    kind = dbm.whichdb(source)
    if kind is None:
        raise DBMError("no database at %s (or it cannot be read)" % source)
    if kind == "":
        raise DBMError("%s is not a database that the standard library's dbm knows" % source)
    return kind


def convert(source, destination, progress=None, **options):
    """Copy the stdlib dbm database ``source`` into a new semidbm database ``destination``.

    ``source`` is what you would pass to :func:`dbm.open`; it is opened
    read-only. ``destination`` must not exist; on failure the part of it
    that was written is removed. ``options`` go to :func:`semidbm.open`.
    ``progress(done, total)``, if given, is called with the count of keys
    copied. Returns ``(kind, count)``: the source's module name (as
    :func:`dbm.whichdb` gives it) and the number of keys copied.
    """
    kind = source_kind(source)
    destination = os.fsdecode(os.fspath(destination))
    if os.path.lexists(destination):
        raise DBMError("%s already exists; convert writes a new database" % destination)
    try:
        old = dbm.open(os.fsdecode(os.fspath(source)), "r")
    except dbm.error[0] as exc:  # not an OSError: "the module is not available"
        raise DBMError("cannot open %s: %s" % (source, exc)) from None
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
            message = "locked by a process that has it open for writing"
            raise DBMError(exc.errno, message, source) from None
        raise
    try:
        new = _db.open(destination, "n", **options)
        try:
            keys = old.keys()
            for done, key in enumerate(keys, 1):
                new[key] = old[key]
                if progress is not None:
                    progress(done, len(keys))
            new.close()
        except BaseException:
            new.close()
            shutil.rmtree(destination, ignore_errors=True)
            raise
    finally:
        old.close()
    return kind, len(keys)
