"""What the tests of migration and of the command line both make and check.

Outputs that would land on or inside a database (export must refuse
them), the SQLite sources ``convert`` refuses or takes, and a directory's
files, to show that a refused command changed nothing.
"""

import contextlib
import os
import pathlib
import sqlite3

#: The ways of naming an output that would land on or inside a database's directory.
INTO_THE_DATABASE = ["data file", "symlink", "hard link", "new file inside", "symlinked directory"]


def output_into_database(kind, database, place):
    """A path of the ``kind`` leading into the ``database`` directory; links go in ``place``."""
    if kind == "data file":
        return database / "data"
    if kind == "new file inside":
        return database / "newfile"
    link = place / "link"
    if kind == "symlink":
        link.symlink_to(database / "data")
    elif kind == "hard link":
        os.link(database / "data", link)
    else:
        link.symlink_to(database)
        return link / "newfile"
    return link


def files_of(directory):
    """Every file of ``directory``, by name, with its bytes: to show that nothing changed."""
    return {path.name: path.read_bytes() for path in pathlib.Path(directory).iterdir()}


#: A table sqlitedict (2.1) makes, as it writes it; its default name is "unnamed".
SQLITEDICT_TABLE = 'CREATE TABLE "%s" (key TEXT PRIMARY KEY, value BLOB)'


def make_sqlite(path, *tables, rows=()):
    """An SQLite database at ``path`` with the ``tables`` (CREATE statements) and ``rows``."""
    with contextlib.closing(sqlite3.connect(path)) as connection:
        for table in tables:
            connection.execute(table)
        for statement, values in rows:
            connection.execute(statement, values)
        connection.commit()
