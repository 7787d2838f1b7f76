"""Data files built by hand, straight from docs/FORMAT.md ("The data file").

The tests of the log compare what semidbm writes with records built
from the document, and give semidbm files made of such records to read.
The records themselves are built in ``index_format``, the reading of the
document that imports no semidbm (0.5.1's interpreter imports it too),
and only named here.
"""

from semidbm.format import HEADER

from .index_format import delete_record, put_record

__all__ = ["put_record", "delete_record", "write_data", "data_bytes"]


def write_data(dbpath, *records, header=HEADER):
    """Make the database directory ``dbpath`` holding a data file of ``header`` and ``records``."""
    dbpath.mkdir()
    (dbpath / "data").write_bytes(header + b"".join(records))


def data_bytes(dbpath):
    """The bytes of the data file of the database directory ``dbpath``."""
    return (dbpath / "data").read_bytes()
