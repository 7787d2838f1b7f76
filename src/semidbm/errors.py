"""The exceptions and warnings semidbm raises.

``error`` follows the stdlib dbm modules: it is the module's exception
class and a subclass of :class:`OSError`, so code that catches
``dbm.error`` members or ``OSError`` also catches semidbm's errors.
"""


class DBMError(OSError):
    """Any semidbm failure: bad use of a database, or an I/O error.

    Raised for operations on a closed database, writes to a read-only
    one, a locked or missing database and failed file operations (then
    ``errno`` is set as the operating system reported it).
    """


class DBMLoadError(DBMError):
    """A data file that cannot be opened as a semidbm database.

    The message names the file and, for damage inside the log, the byte
    offset of the record that could not be read.
    """


class DBMChecksumError(DBMError):
    """A value whose CRC-32 does not match, found with ``verify_checksums``."""


class TornTailWarning(RuntimeWarning):
    """An incomplete last record was found and left out of the database.

    A process that died in the middle of a write leaves such a tail. It
    is not part of the database; a writer cuts it off before appending
    and keeps the bytes in a file named ``data.torn-OFFSET`` beside
    ``data``.
    """


error = DBMError
