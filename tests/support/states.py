"""Data files for the tests of a log's state (``Store.log_state``, ``semidbm.dask``'s plans).

:func:`logs_of_one_length` makes two logs that a check of the file's
length and first bytes cannot tell apart; :func:`copied_data` copies a
data file to a new inode, as a worker's own copy or a restore has.
"""

import os
import shutil

from semidbm.format import DATA_NAME


def copied_data(source, directory):
    """A copy of the data file of the database ``source`` into ``directory``; ``directory``."""
    os.makedirs(directory, exist_ok=True)
    shutil.copyfile(os.path.join(source, DATA_NAME), os.path.join(directory, DATA_NAME))
    return directory


def logs_of_one_length(dbopen, path):
    """Two data files' bytes, each written at ``path``: one key apart in their last record.

    A compacted log of 200 keys (past 8 KiB), then ``AAAA`` in one and
    ``BBBB`` in the other: the same length and the same first 4 KiB. The
    database at ``path`` is left with neither written, its compacted log
    copied beside it (``PATH.base``).
    """
    with dbopen(path, "c") as writer:
        for number in range(200):
            writer[b"key %03d" % number] = b"x" * 40
        writer.compact()
    base = copied_data(path, "%s.base" % path)
    logs = []
    for key in (b"AAAA", b"BBBB"):
        with dbopen(path, "w") as writer:
            writer[key] = b"1"
        with open(os.path.join(path, DATA_NAME), "rb") as data:
            logs.append(data.read())
        copied_data(base, path)
    return logs
