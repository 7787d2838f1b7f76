"""The start of a log semidbm creates: its header, then the log id's put and delete.

Every log semidbm creates (a new database, ``'n'``, each compaction and
upgrade) begins with a pair of records carrying a random log id, so two
logs written by the same operations differ in those bytes only. Tests
that compare a data file with the records they expect take the start
from the file itself through :func:`log_start`, which checks it is a
header and a valid pair, and then compare every byte after it.
"""

from semidbm import _log_id
from semidbm.format import HEADER


def log_start(data, header=HEADER):
    """The first ``_log_id.START_SIZE`` bytes of the data file contents ``data``, checked.

    They must be ``header`` followed by a log id pair (``_log_id.read``
    finds an id), so that ``data == log_start(data) + records`` checks
    every byte of the file.
    """
    start = bytes(data[: _log_id.START_SIZE])
    assert start[: len(header)] == header, "the data file starts with %r" % start[: len(header)]
    assert _log_id.read(start) is not None, "no log id after the header: %r" % start
    return start


def records_after_start(data, header=HEADER):
    """The bytes of ``data`` after its checked :func:`log_start`: the records a caller wrote."""
    return bytes(data[len(log_start(data, header)) :])



#: Records the log id adds to a log semidbm creates: its put and its delete, both dead.
ID_RECORDS = 2


def data_records(directory, header=HEADER):
    """The records of the data file of the database ``directory`` (a Path), past its start."""
    return records_after_start((directory / "data").read_bytes(), header)
