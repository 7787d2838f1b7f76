"""Data files built by hand, straight from docs/FORMAT.md ("The data file").

The tests of the log compare what semidbm writes with records built here
from the document, and give semidbm files made of such records to read.
"""

import struct
import zlib

from semidbm.format import HEADER


def put_record(key, value):
    """A put record, built straight from FORMAT.md."""
    crc = zlib.crc32(key + value) & 0xFFFFFFFF
    return struct.pack("!ii", len(key), len(value)) + key + value + struct.pack("!I", crc)


def delete_record(key):
    """A delete record, built straight from FORMAT.md."""
    return struct.pack("!ii", len(key), -1) + key + struct.pack("!I", zlib.crc32(key) & 0xFFFFFFFF)


def write_data(dbpath, *records, header=HEADER):
    """Make the database directory ``dbpath`` holding a data file of ``header`` and ``records``."""
    dbpath.mkdir()
    (dbpath / "data").write_bytes(header + b"".join(records))


def data_bytes(dbpath):
    """The bytes of the data file of the database directory ``dbpath``."""
    return (dbpath / "data").read_bytes()
