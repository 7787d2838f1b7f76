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


class DBMSignatureError(DBMError):
    """A shelf value refused before it was deserialized: its signature is missing or wrong.

    Raised by a shelf opened with a signing key (``open_shelf(...,
    key=secret)``, :class:`semidbm.shelf.SigningSerializer`) for a value
    that is unsigned, whose signature is cut short, made for another
    serializer, or does not match: written without the key, with
    another key, under another key of the database, or changed since.
    Raised too by a shelf without a key for a value that is signed, which
    it cannot check. Either way the serializer never saw the value: a
    pickle planted in the file runs no code. ``reason`` says which
    refusal it is, in words.
    """

    #: Why the value was refused, in words ("it is unsigned ...").
    reason: str = ""


class DBMNotSyncedError(DBMError):
    """A write whose sync failed: dbm.gnu's flag letter ``s``.

    A database opened with ``s`` syncs after every call that may write
    (whether or not it changed anything: ``pop`` of a missing key with a
    default syncs too); when that sync fails (a full disk, an I/O error),
    what the call changed is in the database all the same: this handle
    and its readers see it. It may not be on the disk: after a failed
    fsync the operating system may have dropped the written pages (Linux
    marks them clean), so a later :meth:`~semidbm.Database.sync` that
    succeeds does not prove them durable. ``result`` is what the write
    returned before its sync failed: the value of ``pop``, the item of
    ``popitem``, the value of ``setdefault``; None for the others.
    """

    #: What the write returned (``pop``'s value...), which its failed sync would lose.
    result: object = None


class TornTailWarning(RuntimeWarning):
    """An incomplete last record was found and left out of the database.

    A process that died in the middle of a write leaves such a tail. It
    is not part of the database; a writer cuts it off before appending
    and keeps the bytes in a file named ``data.torn-OFFSET`` beside
    ``data``.
    """


error = DBMError
