"""The start of a log semidbm creates: its header, then its first checkpoint.

Every log semidbm creates (a new database, ``'n'``, each compaction and
upgrade) begins with a checkpoint, a put and a delete of a key holding
random bytes, so two logs written by the same operations differ in those
bytes. Tests that compare a data file with the records they expect take
the start from the file itself through :func:`log_start`, which checks it
is a header and a whole checkpoint, and then compare every byte after it
(for a whole database directory, :func:`directory_contents`).
"""

import os

from semidbm import _checkpoint
from semidbm.format import HEADER, INDEX_NAME


def log_start(data, header=HEADER):
    """The first ``_checkpoint.START_SIZE`` bytes of the data file contents ``data``, checked.

    They must be ``header`` followed by a checkpoint (``_checkpoint.read``
    finds one), so that ``data == log_start(data) + records`` checks every
    byte of the file.
    """
    start = bytes(data[: _checkpoint.START_SIZE])
    assert start[: len(header)] == header, "the data file starts with %r" % start[: len(header)]
    assert first_checkpoint(start) is not None, "no checkpoint after the header: %r" % start
    return start


def first_checkpoint(data):
    """The nonce of the checkpoint right after the header of the data file contents ``data``."""
    return _checkpoint.read(bytes(data[len(HEADER) : _checkpoint.START_SIZE]))


def records_after_start(data, header=HEADER):
    """The bytes of ``data`` after its checked :func:`log_start`: the records a caller wrote."""
    return bytes(data[len(log_start(data, header)) :])


#: Records a new log's first checkpoint adds to it: its put and its delete, both dead.
CHECKPOINT_RECORDS = 2


def data_records(directory, header=HEADER):
    """The records of the data file of the database ``directory`` (a Path), past its start."""
    return records_after_start((directory / "data").read_bytes(), header)


def checkpoints_in(data):
    """``(offset, size)`` of each checkpoint in the data file contents ``data``."""
    data = bytes(data)
    found = []
    at = data.find(_checkpoint.PREFIX)
    while at >= 0:
        parsed = _checkpoint.parse(data[at - 8 :]) if at >= 8 else None
        if parsed is not None:
            found.append((at - 8, parsed[1]))
        at = data.find(_checkpoint.PREFIX, at + 1)
    return found


def ending_checkpoint(data):
    """The offset of the checkpoint that ends the data file contents ``data``, or None.

    A compiled writer appends one right before each index file it writes at a close or a sync.
    """
    found = checkpoints_in(data)
    if found and sum(found[-1]) == len(data):
        return found[-1][0]
    return None


def directory_contents(path):
    """Every file in the database directory and its bytes, but the compiled kernel's index file.

    The data file's bytes are those after its log start (checked), since
    each log's id is random.
    """
    contents = {}
    for name in sorted(set(os.listdir(path)) - {INDEX_NAME}):
        with open(os.path.join(path, name), "rb") as handle:
            contents[name] = handle.read()
    contents["data"] = records_after_start(contents["data"])
    return contents
